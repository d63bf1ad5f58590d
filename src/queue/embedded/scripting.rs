//! Scripts as Redis runs them: Lua 5.1 with `KEYS` and `ARGV`, the `redis` library (`call`,
//! `pcall`, `sha1hex`, `error_reply`, `status_reply`) and the `struct` library, over the
//! in-process keyspace; cached by SHA-1 (SCRIPT LOAD, EVALSHA, EVAL). A reply converts between
//! Lua and Redis as Redis converts it: a number is an integer, `false` is nil, a table with `ok`
//! or `err` is a status or an error, any other table is an array up to its first nil.

use std::collections::HashMap;

use ::redis::Value;
use mlua::{Function, Lua, LuaOptions, StdLib, Table, Value as LuaValue, Variadic};

use super::keyspace::{CommandError, Keyspace, Reply};
use super::struct_lib;
use super::Bytes;

/// What a running script's `redis.call` works on: the keyspace, the time of the call, and the
/// effects its writes leave for the journal.
pub(super) struct Running {
    pub keyspace: Keyspace,
    pub now_ms: i64,
    pub effects: Vec<Vec<Bytes>>,
}

/// The Lua state, the scripts loaded into it, and (in its app data) the [`Running`] state.
pub(super) struct Scripting {
    lua: Lua,
    /// Each loaded script's function, by the hex SHA-1 of its source.
    by_sha: HashMap<String, Function>,
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
        lua.set_app_data(Running {
            keyspace,
            now_ms: 0,
            effects: Vec::new(),
        });
        let redis = lua.create_table()?;
        redis.set(
            "call",
            lua.create_function(|lua, args: Variadic<LuaValue>| call(lua, args, true))?,
        )?;
        redis.set(
            "pcall",
            lua.create_function(|lua, args: Variadic<LuaValue>| call(lua, args, false))?,
        )?;
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
        })
    }

    /// The running state: the keyspace between scripts, too.
    pub fn running(&self) -> mlua::AppDataRefMut<'_, Running> {
        self.lua.app_data_mut::<Running>().expect("set at creation")
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
        self.running().now_ms = now_ms;
        let lua_error = |e: mlua::Error| format!("ERR Error running script: {e}");
        let globals = self.lua.globals();
        let keys = self.strings(&params[..numkeys]).map_err(lua_error)?;
        let argv = self.strings(&params[numkeys..]).map_err(lua_error)?;
        globals.set("KEYS", keys).map_err(lua_error)?;
        globals.set("ARGV", argv).map_err(lua_error)?;
        let result = f.call::<LuaValue>(());
        match result {
            Ok(v) => to_redis(&v),
            Err(e) => Err(script_error(e)),
        }
    }

    /// Runs a script given whole (EVAL): loaded, then run.
    pub fn eval(&mut self, now_ms: i64, source: &[u8], rest: &[Bytes]) -> Reply {
        let sha = self.load(source)?;
        self.eval_sha(now_ms, sha.as_bytes(), rest)
    }

    fn strings(&self, items: &[Bytes]) -> mlua::Result<Table> {
        let t = self.lua.create_table_with_capacity(items.len(), 0)?;
        for (i, b) in items.iter().enumerate() {
            t.raw_set(i + 1, self.lua.create_string(b)?)?;
        }
        Ok(t)
    }
}

/// The error a failed script answers: an error a command raised keeps its own code (so
/// WRONGTYPE stays WRONGTYPE), anything else is an `ERR`.
fn script_error(e: mlua::Error) -> CommandError {
    let mut e = &e;
    while let mlua::Error::CallbackError { cause, .. } = e {
        e = cause;
    }
    match e {
        mlua::Error::ExternalError(inner) => inner.to_string(),
        other => format!("ERR Error running script: {other}"),
    }
}

/// A command error raised from `redis.call`, carried through Lua to the script's answer.
#[derive(Debug)]
struct Raised(CommandError);

impl std::fmt::Display for Raised {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for Raised {}

/// `redis.call` (`raise`) or `redis.pcall`: the command's arguments as Redis reads them from
/// Lua (a string as it is, a number as its integer or shortest form), run on the keyspace.
fn call(lua: &Lua, args: Variadic<LuaValue>, raise: bool) -> mlua::Result<LuaValue> {
    let mut argv = Vec::with_capacity(args.len());
    for a in args.iter() {
        argv.push(match a {
            LuaValue::String(s) => s.as_bytes().to_vec(),
            LuaValue::Integer(i) => i.to_string().into_bytes(),
            LuaValue::Number(n) => super::sorted_set::Score::format(*n).into_bytes(),
            _ => {
                return Err(mlua::Error::external(Raised(
                    "ERR Lua redis lib command arguments must be strings or integers".to_owned(),
                )))
            }
        });
    }
    if argv.is_empty() {
        return Err(mlua::Error::external(Raised(
            "ERR Please specify at least one argument for this redis lib call".to_owned(),
        )));
    }
    let reply = {
        let mut running = lua.app_data_mut::<Running>().expect("set at creation");
        let Running {
            keyspace,
            now_ms,
            effects,
        } = &mut *running;
        keyspace.run(*now_ms, &argv, effects)
    };
    match reply {
        Ok(v) => to_lua(lua, v),
        Err(e) if raise => Err(mlua::Error::external(Raised(e))),
        Err(e) => {
            let t = lua.create_table()?;
            t.set("err", e)?;
            Ok(LuaValue::Table(t))
        }
    }
}

/// A Redis reply as a script sees it.
fn to_lua(lua: &Lua, v: Value) -> mlua::Result<LuaValue> {
    Ok(match v {
        Value::Nil => LuaValue::Boolean(false),
        Value::Int(i) => LuaValue::Number(i as f64),
        Value::BulkString(b) => LuaValue::String(lua.create_string(b)?),
        Value::Okay => status(lua, "OK")?,
        Value::SimpleString(s) => status(lua, &s)?,
        Value::Array(items) => {
            let t = lua.create_table_with_capacity(items.len(), 0)?;
            for (i, item) in items.into_iter().enumerate() {
                t.raw_set(i + 1, to_lua(lua, item)?)?;
            }
            LuaValue::Table(t)
        }
        other => {
            return Err(mlua::Error::external(Raised(format!(
                "ERR a reply scripts do not take: {other:?}"
            ))))
        }
    })
}

fn status(lua: &Lua, s: &str) -> mlua::Result<LuaValue> {
    let t = lua.create_table()?;
    t.set("ok", s)?;
    Ok(LuaValue::Table(t))
}

/// A script's answer as Redis sends it.
fn to_redis(v: &LuaValue) -> Reply {
    Ok(match v {
        LuaValue::Nil | LuaValue::Boolean(false) => Value::Nil,
        LuaValue::Boolean(true) => Value::Int(1),
        LuaValue::Integer(i) => Value::Int(*i),
        LuaValue::Number(n) => Value::Int(*n as i64),
        LuaValue::String(s) => Value::BulkString(s.as_bytes().to_vec()),
        LuaValue::Table(t) => {
            if let Ok(LuaValue::String(e)) = t.raw_get::<LuaValue>("err") {
                return Err(e.to_string_lossy());
            }
            if let Ok(LuaValue::String(s)) = t.raw_get::<LuaValue>("ok") {
                return Ok(Value::SimpleString(s.to_string_lossy()));
            }
            let mut items = Vec::new();
            for i in 1.. {
                match t.raw_get::<LuaValue>(i) {
                    Ok(LuaValue::Nil) | Err(_) => break,
                    // An error inside an array is answered as that element, as Redis does.
                    Ok(item) => items.push(to_redis(&item).unwrap_or_else(error_value)),
                }
            }
            Value::Array(items)
        }
        _ => Value::Nil,
    })
}

/// An error reply as a value (an element of an array, or a whole answer).
pub(super) fn error_value(message: CommandError) -> Value {
    ::redis::parse_redis_value(format!("-{}\r\n", message.replace(['\r', '\n'], " ")).as_bytes())
        .unwrap_or(Value::Nil)
}
