//! Scripts as Redis runs them: Lua 5.1 with `KEYS` and `ARGV`, the `redis` library (`call`,
//! `pcall`, `sha1hex`, `error_reply`, `status_reply`) and the `struct` library, over the
//! in-process keyspace; cached by SHA-1 (SCRIPT LOAD, EVALSHA, EVAL). A reply converts between
//! Lua and Redis as Redis converts it: a number is an integer, `false` is nil, a table with `ok`
//! or `err` is a status or an error, any other table is an array up to its first nil.

use std::cell::{RefCell, RefMut};
use std::collections::HashMap;
use std::ffi::{c_int, c_void};
use std::panic::AssertUnwindSafe;

use ::redis::Value;
use mlua::{ffi, Function, Lua, LuaOptions, StdLib};

use super::keyspace::{CommandError, Keyspace, Reply};
use super::struct_lib;
use super::Bytes;

/// What a running script's `redis.call` works on: the keyspace, the time of the call, and the
/// effects its writes leave for the journal.
pub(super) struct Running {
    pub keyspace: Keyspace,
    pub now_ms: i64,
    pub effects: Vec<Vec<Bytes>>,
    /// The error the last `redis.call` raised in the running script: the script's answer
    /// when that error ends it, so WRONGTYPE stays WRONGTYPE.
    raised: Option<CommandError>,
}

/// The Lua state, the scripts loaded into it, and the [`Running`] state its `redis.call`
/// works on.
pub(super) struct Scripting {
    lua: Lua,
    /// Each loaded script's function, by the hex SHA-1 of its source.
    by_sha: HashMap<String, Function>,
    /// Boxed so that its address, the upvalue of `redis.call` and `redis.pcall`, stays put.
    running: Box<RefCell<Running>>,
}

fn sha1_hex(source: &[u8]) -> String {
    hex::encode(ring::digest::digest(&ring::digest::SHA1_FOR_LEGACY_USE_ONLY, source).as_ref())
}

impl Scripting {
    pub fn new(keyspace: Keyspace) -> mlua::Result<Self> {
        let lua = Lua::new_with(
            StdLib::TABLE | StdLib::STRING | StdLib::MATH,
            LuaOptions::default(),
        )?;
        let running = Box::new(RefCell::new(Running {
            keyspace,
            now_ms: 0,
            effects: Vec::new(),
            raised: None,
        }));
        let redis = lua.create_table()?;
        let at = std::ptr::from_ref::<RefCell<Running>>(&running) as *mut c_void;
        for (name, f) in [
            ("call", redis_call as ffi::lua_CFunction),
            ("pcall", redis_pcall),
        ] {
            // SAFETY: pushes a C closure whose one upvalue is the boxed running state, which
            // lives as long as the Lua state (both are this struct's).
            let function: Function = unsafe {
                lua.exec_raw((), |state| {
                    ffi::lua_pushlightuserdata(state, at);
                    ffi::lua_pushcclosure(state, f, 1);
                })?
            };
            redis.set(name, function)?;
        }
        redis.set(
            "sha1hex",
            lua.create_function(|_, s: mlua::String| Ok(sha1_hex(&s.as_bytes())))?,
        )?;
        // A reply of one field: `{err = …}` is an error, `{ok = …}` a status.
        for (name, field) in [("error_reply", "err"), ("status_reply", "ok")] {
            let reply = lua.create_function(move |lua, s: mlua::String| {
                let t = lua.create_table()?;
                t.set(field, s)?;
                Ok(t)
            })?;
            redis.set(name, reply)?;
        }
        lua.globals().set("redis", redis)?;
        lua.globals().set("struct", struct_lib::table(&lua)?)?;
        Ok(Scripting {
            lua,
            by_sha: HashMap::new(),
            running,
        })
    }

    /// The running state: the keyspace between scripts, too.
    pub fn running(&self) -> RefMut<'_, Running> {
        self.running.borrow_mut()
    }

    pub fn exists(&self, sha: &[u8]) -> bool {
        std::str::from_utf8(sha).is_ok_and(|s| self.by_sha.contains_key(&s.to_ascii_lowercase()))
    }

    /// Compiles and keeps a script (SCRIPT LOAD): its SHA-1.
    pub fn load(&mut self, source: &[u8]) -> Result<String, CommandError> {
        let sha = sha1_hex(source);
        if !self.by_sha.contains_key(&sha) {
            let f = self
                .lua
                .load(source)
                .set_name(format!("@user_script:{sha}"))
                .into_function()
                .map_err(|e| format!("ERR Error compiling script (new function): {e}"))?;
            self.by_sha.insert(sha.clone(), f);
        }
        Ok(sha)
    }

    /// Runs a loaded script (EVALSHA) with its keys and arguments, `now_ms` its time.
    pub fn eval_sha(&mut self, now_ms: i64, sha: &[u8], rest: &[Bytes]) -> Reply {
        let sha = String::from_utf8_lossy(sha).to_ascii_lowercase();
        let Some(f) = self.by_sha.get(&sha).cloned() else {
            return Err("NOSCRIPT No matching script. Please use EVAL.".to_owned());
        };
        let numkeys = rest
            .first()
            .and_then(|n| std::str::from_utf8(n).ok()?.parse::<usize>().ok())
            .ok_or("ERR value is not an integer or out of range")?;
        let params = &rest[1..];
        if numkeys > params.len() {
            return Err("ERR Number of keys can't be greater than number of args".to_owned());
        }
        {
            let mut running = self.running();
            running.now_ms = now_ms;
            running.raised = None;
        }
        let (keys, argv) = params.split_at(numkeys);
        // SAFETY: the closure sets KEYS and ARGV from borrowed bytes and calls the script (the
        // one argument on the stack), holding nothing that needs dropping: a Lua error leaves
        // it by longjmp into `exec_raw`'s protected call, which answers it as an error.
        // Its answer is read from the stack once the call returned, when nothing can longjmp.
        let mut answer = Ok(Value::Nil);
        let result = unsafe {
            self.lua.exec_raw::<()>(&f, |state| {
                set_strings(state, c"KEYS", keys);
                set_strings(state, c"ARGV", argv);
                ffi::lua_call(state, 0, 1);
                answer = answer_at(state, ffi::lua_gettop(state));
            })
        };
        match result {
            Ok(()) => answer,
            Err(e) => Err(script_error(e, self.running().raised.take())),
        }
    }

    /// Runs a script given whole (EVAL): loaded, then run.
    pub fn eval(&mut self, now_ms: i64, source: &[u8], rest: &[Bytes]) -> Reply {
        let sha = self.load(source)?;
        self.eval_sha(now_ms, sha.as_bytes(), rest)
    }
}

/// Sets the global `name` to a table of `items` as Lua strings (KEYS, ARGV), made on the stack
/// directly: a call of a batch carries a few hundred.
///
/// # Safety
/// Within a protected call, with two free stack slots.
unsafe fn set_strings(state: *mut ffi::lua_State, name: &std::ffi::CStr, items: &[Bytes]) {
    ffi::lua_createtable(state, c_int::try_from(items.len()).unwrap_or(0), 0);
    for (i, b) in items.iter().enumerate() {
        ffi::lua_pushlstring(state, b.as_ptr().cast(), b.len());
        ffi::lua_rawseti(state, -2, i as ffi::lua_Integer + 1);
    }
    ffi::lua_setglobal(state, name.as_ptr());
}

/// The error a failed script answers: the error a `redis.call` raised when that is what ended
/// it (mlua adds a traceback after it), so WRONGTYPE stays WRONGTYPE; anything else is an
/// `ERR`.
fn script_error(e: mlua::Error, raised: Option<CommandError>) -> CommandError {
    let mut e = &e;
    while let mlua::Error::CallbackError { cause, .. } = e {
        e = cause;
    }
    match (e, raised) {
        (mlua::Error::RuntimeError(text), Some(raised)) if text.starts_with(&raised) => raised,
        (other, _) => format!("ERR Error running script: {other}"),
    }
}

/// `redis.call`: a command error ends the script.
unsafe extern "C-unwind" fn redis_call(state: *mut ffi::lua_State) -> c_int {
    command(state, true)
}

/// `redis.pcall`: a command error is answered as `{err = …}`.
unsafe extern "C-unwind" fn redis_pcall(state: *mut ffi::lua_State) -> c_int {
    command(state, false)
}

/// Runs the command whose arguments are on the stack and leaves its reply there. A script
/// makes a call for nearly every line it runs, so the arguments are read from the stack and
/// the reply pushed onto it directly, with none of the registry references mlua's general
/// callbacks take for each value.
///
/// # Safety
/// Called by Lua as a C closure made in [`Scripting::new`].
unsafe fn command(state: *mut ffi::lua_State, raise: bool) -> c_int {
    // A panic (a bug of the keyspace) must not unwind through Lua's C frames: it fails the
    // script instead.
    let raise = match std::panic::catch_unwind(AssertUnwindSafe(|| run_command(state, raise))) {
        Ok(raise) => raise,
        Err(panic) => {
            drop(panic);
            ffi::lua_settop(state, 0);
            let e = "ERR the in-process store failed to run the command";
            ffi::lua_pushlstring(state, e.as_ptr().cast(), e.len());
            true
        }
    };
    // Every Rust value is dropped by now: raising the error leaves this frame by Lua's
    // longjmp, past no destructor.
    if raise {
        ffi::lua_error(state);
    }
    1
}

/// The command's work for [`command`]: true when the error on top of the stack is to be
/// raised, else the reply (or, for `pcall`, the error as `{err = …}`) is there.
unsafe fn run_command(state: *mut ffi::lua_State, raise: bool) -> bool {
    // SAFETY: the closure's upvalue is the boxed running state (`Scripting::new`).
    let running =
        &*(ffi::lua_touserdata(state, ffi::lua_upvalueindex(1)) as *const RefCell<Running>);
    let mut argv: Vec<Bytes> = Vec::with_capacity(ffi::lua_gettop(state).max(0) as usize);
    for i in 1..=ffi::lua_gettop(state) {
        match ffi::lua_type(state, i) {
            ffi::LUA_TSTRING => argv.push(bytes_at(state, i).to_vec()),
            ffi::LUA_TNUMBER => argv.push(number_argument(ffi::lua_tonumber(state, i))),
            _ => {
                let e = "ERR Lua redis lib command arguments must be strings or integers";
                return failed(state, running, e.to_owned(), true);
            }
        }
    }
    if argv.is_empty() {
        let e = "ERR Please specify at least one argument for this redis lib call";
        return failed(state, running, e.to_owned(), true);
    }
    let reply = {
        let mut running = running.borrow_mut();
        let Running {
            keyspace,
            now_ms,
            effects,
            ..
        } = &mut *running;
        keyspace.run(*now_ms, &argv, effects)
    };
    drop(argv);
    ffi::lua_settop(state, 0);
    match reply.and_then(|v| push_reply(state, v)) {
        Ok(()) => false,
        Err(e) => {
            ffi::lua_settop(state, 0);
            failed(state, running, e, raise)
        }
    }
}

/// A number argument as Redis reads it from Lua: an integer as its digits, any other number
/// in its shortest form.
fn number_argument(n: f64) -> Bytes {
    let integral = n.fract() == 0.0 && n.abs() < 9.2e18;
    if integral {
        (n as i64).to_string().into_bytes()
    } else {
        super::sorted_set::Score::format(n).into_bytes()
    }
}

/// Leaves the error `e` on the stack: raised (kept as the script's answer, should it end the
/// script) or, when not, as `{err = e}`.
unsafe fn failed(
    state: *mut ffi::lua_State,
    running: &RefCell<Running>,
    e: CommandError,
    raise: bool,
) -> bool {
    if raise {
        ffi::lua_pushlstring(state, e.as_ptr().cast(), e.len());
        running.borrow_mut().raised = Some(e);
    } else {
        one_field(state, c"err", &e);
    }
    raise
}

/// Pushes `{<field> = value}`.
unsafe fn one_field(state: *mut ffi::lua_State, field: &std::ffi::CStr, value: &str) {
    ffi::lua_createtable(state, 0, 1);
    ffi::lua_pushlstring(state, value.as_ptr().cast(), value.len());
    ffi::lua_setfield(state, -2, field.as_ptr());
}

/// Pushes a Redis reply as a script sees it.
unsafe fn push_reply(state: *mut ffi::lua_State, v: Value) -> Result<(), CommandError> {
    if ffi::lua_checkstack(state, 3) == 0 {
        return Err("ERR reply too deep for a script".to_owned());
    }
    match v {
        Value::Nil => ffi::lua_pushboolean(state, 0),
        Value::Int(i) => ffi::lua_pushnumber(state, i as f64),
        Value::BulkString(b) => {
            ffi::lua_pushlstring(state, b.as_ptr().cast(), b.len());
        }
        Value::Okay => one_field(state, c"ok", "OK"),
        Value::SimpleString(s) => one_field(state, c"ok", &s),
        Value::Array(items) => {
            ffi::lua_createtable(state, c_int::try_from(items.len()).unwrap_or(0), 0);
            for (i, item) in items.into_iter().enumerate() {
                push_reply(state, item)?;
                ffi::lua_rawseti(state, -2, i as ffi::lua_Integer + 1);
            }
        }
        other => return Err(format!("ERR a reply scripts do not take: {other:?}")),
    }
    Ok(())
}

/// The script's answer at the absolute stack index `at`, as Redis sends it: a number is an
/// integer, `false` is nil, a table with `err` or `ok` is an error or a status, any other table
/// is an array up to its first nil.
///
/// # Safety
/// `at` is a valid absolute index of `state`.
unsafe fn answer_at(state: *mut ffi::lua_State, at: c_int) -> Reply {
    Ok(match ffi::lua_type(state, at) {
        ffi::LUA_TBOOLEAN if ffi::lua_toboolean(state, at) != 0 => Value::Int(1),
        ffi::LUA_TNUMBER => Value::Int(ffi::lua_tonumber(state, at) as i64),
        ffi::LUA_TSTRING => Value::BulkString(bytes_at(state, at).to_vec()),
        ffi::LUA_TTABLE => {
            if ffi::lua_checkstack(state, 2) == 0 {
                return Err("ERR a script's answer nested too deep".to_owned());
            }
            if let Some(e) = string_field(state, at, c"err") {
                return Err(String::from_utf8_lossy(&e).into_owned());
            }
            if let Some(s) = string_field(state, at, c"ok") {
                return Ok(Value::SimpleString(
                    String::from_utf8_lossy(&s).into_owned(),
                ));
            }
            let mut items = Vec::new();
            for i in 1.. {
                ffi::lua_rawgeti(state, at, i);
                let item = ffi::lua_gettop(state);
                if ffi::lua_type(state, item) == ffi::LUA_TNIL {
                    ffi::lua_pop(state, 1);
                    break;
                }
                // An error inside an array is answered as that element, as Redis does.
                items.push(answer_at(state, item).unwrap_or_else(error_value));
                ffi::lua_pop(state, 1);
            }
            Value::Array(items)
        }
        _ => Value::Nil,
    })
}

/// The string at `at`, borrowed from Lua (valid while the value stays on the stack).
unsafe fn bytes_at<'a>(state: *mut ffi::lua_State, at: c_int) -> &'a [u8] {
    let mut len = 0;
    let p = ffi::lua_tolstring(state, at, &mut len);
    std::slice::from_raw_parts(p.cast::<u8>(), len)
}

/// The table at `at`'s field `name`, when it is a string (read raw, as Redis reads `err`/`ok`).
unsafe fn string_field(
    state: *mut ffi::lua_State,
    at: c_int,
    name: &std::ffi::CStr,
) -> Option<Bytes> {
    ffi::lua_pushstring(state, name.as_ptr());
    ffi::lua_rawget(state, at);
    let value =
        (ffi::lua_type(state, -1) == ffi::LUA_TSTRING).then(|| bytes_at(state, -1).to_vec());
    ffi::lua_pop(state, 1);
    value
}

/// An error reply as a value (an element of an array, or a whole answer).
pub(super) fn error_value(message: CommandError) -> Value {
    ::redis::parse_redis_value(format!("-{}\r\n", message.replace(['\r', '\n'], " ")).as_bytes())
        .unwrap_or(Value::Nil)
}
