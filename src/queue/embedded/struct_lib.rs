//! The `struct` library Redis gives scripts (Roberto Ierusalimschy's `lua_struct`):
//! `struct.pack(fmt, ...)` and `struct.unpack(fmt, s [, pos])`, for the formats of integers
//! (`b B h H i I l L`, `i`/`I` with a size of 1 to 8), fixed strings (`c<n>`), floats (`f d`),
//! the byte order (`<` little, `>` big, `=` and `!` native) and spaces. `lua/lib/queue.lua`
//! packs serials as `>I4`.

use mlua::{Lua, MultiValue, Table, Value as LuaValue};

/// One item of a format.
enum Item {
    Int { size: usize, signed: bool },
    Chars(usize),
    Float,
    Double,
}

/// Reads a format into its items, each with the byte order in force (true: big-endian).
fn parse(fmt: &[u8]) -> mlua::Result<Vec<(Item, bool)>> {
    let mut out = Vec::new();
    let mut big = cfg!(target_endian = "big");
    let mut i = 0;
    let size = |i: &mut usize, default: usize| {
        let start = *i;
        while *i < fmt.len() && fmt[*i].is_ascii_digit() {
            *i += 1;
        }
        std::str::from_utf8(&fmt[start..*i])
            .ok()
            .and_then(|s| s.parse().ok())
            .unwrap_or(default)
    };
    while i < fmt.len() {
        let c = fmt[i];
        i += 1;
        let item = match c {
            b' ' => continue,
            b'<' => {
                big = false;
                continue;
            }
            b'>' => {
                big = true;
                continue;
            }
            b'=' | b'!' => {
                big = cfg!(target_endian = "big");
                size(&mut i, 0);
                continue;
            }
            b'b' | b'B' => Item::Int {
                size: 1,
                signed: c == b'b',
            },
            b'h' | b'H' => Item::Int {
                size: 2,
                signed: c == b'h',
            },
            b'l' | b'L' => Item::Int {
                size: 8,
                signed: c == b'l',
            },
            b'i' | b'I' => {
                let n = size(&mut i, 4);
                if !(1..=8).contains(&n) {
                    return Err(mlua::Error::runtime(format!(
                        "integral size {n} is larger than limit of 8"
                    )));
                }
                Item::Int {
                    size: n,
                    signed: c == b'i',
                }
            }
            b'c' => Item::Chars(size(&mut i, 1)),
            b'f' => Item::Float,
            b'd' => Item::Double,
            other => {
                return Err(mlua::Error::runtime(format!(
                    "invalid format option '{}'",
                    other as char
                )))
            }
        };
        out.push((item, big));
    }
    Ok(out)
}

fn number(v: Option<&LuaValue>) -> mlua::Result<f64> {
    match v {
        Some(LuaValue::Integer(i)) => Ok(*i as f64),
        Some(LuaValue::Number(n)) => Ok(*n),
        Some(LuaValue::String(s)) => s
            .to_str()
            .ok()
            .and_then(|s| s.trim().parse().ok())
            .ok_or_else(|| mlua::Error::runtime("bad argument to 'pack' (number expected)")),
        _ => Err(mlua::Error::runtime(
            "bad argument to 'pack' (number expected)",
        )),
    }
}

fn pack(lua: &Lua, args: MultiValue) -> mlua::Result<mlua::String> {
    let mut args = args.into_iter();
    let fmt = match args.next() {
        Some(LuaValue::String(s)) => s.as_bytes().to_vec(),
        _ => {
            return Err(mlua::Error::runtime(
                "bad argument #1 to 'pack' (string expected)",
            ))
        }
    };
    let mut out = Vec::new();
    for (item, big) in parse(&fmt)? {
        let arg = args.next();
        match item {
            Item::Int { size, .. } => {
                let n = number(arg.as_ref())? as i64;
                let bytes = n.to_le_bytes();
                let mut b = bytes[..size].to_vec();
                if big {
                    b.reverse();
                }
                out.extend(b);
            }
            Item::Chars(n) => {
                let Some(LuaValue::String(s)) = arg else {
                    return Err(mlua::Error::runtime(
                        "bad argument to 'pack' (string expected)",
                    ));
                };
                let s = s.as_bytes();
                let mut b = s[..n.min(s.len())].to_vec();
                b.resize(n, 0);
                out.extend(b);
            }
            Item::Float => {
                let b = (number(arg.as_ref())? as f32).to_bits().to_le_bytes();
                out.extend(if big {
                    b.iter().rev().copied().collect::<Vec<_>>()
                } else {
                    b.to_vec()
                });
            }
            Item::Double => {
                let b = number(arg.as_ref())?.to_bits().to_le_bytes();
                out.extend(if big {
                    b.iter().rev().copied().collect::<Vec<_>>()
                } else {
                    b.to_vec()
                });
            }
        }
    }
    lua.create_string(out)
}

fn unpack(
    lua: &Lua,
    (fmt, data, pos): (mlua::String, mlua::String, Option<i64>),
) -> mlua::Result<MultiValue> {
    let data = data.as_bytes();
    let mut at = usize::try_from(pos.unwrap_or(1) - 1).map_err(|_| {
        mlua::Error::runtime("bad argument #3 to 'unpack' (offset must be 1 or greater)")
    })?;
    let mut out = Vec::new();
    for (item, big) in parse(&fmt.as_bytes())? {
        let size = match item {
            Item::Int { size, .. } => size,
            Item::Chars(n) => n,
            Item::Float => 4,
            Item::Double => 8,
        };
        let Some(raw) = data.get(at..at + size) else {
            return Err(mlua::Error::runtime(
                "bad argument #2 to 'unpack' (data string too short)",
            ));
        };
        let mut b = raw.to_vec();
        if big && !matches!(item, Item::Chars(_)) {
            b.reverse();
        }
        out.push(match item {
            Item::Int { size, signed } => {
                let mut wide = [0u8; 8];
                wide[..size].copy_from_slice(&b);
                let mut n = u64::from_le_bytes(wide) as i64;
                if signed && size < 8 && b[size - 1] & 0x80 != 0 {
                    n -= 1i64 << (8 * size);
                }
                LuaValue::Number(n as f64)
            }
            Item::Chars(_) => LuaValue::String(lua.create_string(&b)?),
            Item::Float => LuaValue::Number(f64::from(f32::from_bits(u32::from_le_bytes(
                b.try_into().expect("4 bytes"),
            )))),
            Item::Double => LuaValue::Number(f64::from_bits(u64::from_le_bytes(
                b.try_into().expect("8 bytes"),
            ))),
        });
        at += size;
    }
    out.push(LuaValue::Number((at + 1) as f64));
    Ok(MultiValue::from_iter(out))
}

/// The library's table, for the global `struct`.
pub(super) fn table(lua: &Lua) -> mlua::Result<Table> {
    let t = lua.create_table()?;
    t.set("pack", lua.create_function(pack)?)?;
    t.set("unpack", lua.create_function(unpack)?)?;
    Ok(t)
}
