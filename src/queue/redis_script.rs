//! How a script of `lua/` is called: the type of its arguments and the type of its reply, each
//! written as a struct whose fields are in the order the script reads or returns them
//! ([`args!`], [`reply!`]). A field's type says how it travels:
//! - a single value (`String`, `u64`, `i64`, `f64`, `u32`, `usize`, `&'static str`);
//! - `Option<T>`: a value the script may leave off at the end of its reply;
//! - [`Rest<T>`]: every value to the end (the seats of a hold, the departures of a refresh);
//! - [`Each<T>`]: groups of `T`'s fields to the end (the joins of a batch, one per user);
//! - [`Counted<P>`]: `P` after a count of its items (the parts of `init_sale`'s snapshot);
//! - [`Nested<T>`] (replies): one array value holding a `T`; `Vec<String>`: one array value;
//! - a struct of its own (arguments): its fields in line (the settings).
//!
//! Each type writes its shape (`status, attempt, lookup...: [owner, position]`), and each
//! script's header names the same shape on its `ARGV:` and `REPLY:` lines: a unit test in
//! `redis_scripts.rs` compares them, so a value added to a script and not to its type (or the
//! other way round) fails there, and a reply is decoded by name, strictly: a missing, extra or
//! mistyped value is a [`super::QueueError::Protocol`] naming the script.

use std::slice::Iter;

use ::redis::{FromRedisValue, ScriptInvocation, ToRedisArgs, Value};

/// Every value from here to the end of the arguments or the reply.
pub(super) struct Rest<T>(pub Vec<T>);

/// Groups of `T`'s fields from here to the end of the arguments or the reply.
pub(super) struct Each<T>(pub Vec<T>);

/// `P` (a [`Rest`] or an [`Each`]) after the number of its items, so that more may follow.
pub(super) struct Counted<P>(pub P);

/// One array value of a reply, holding a `T`.
pub(super) struct Nested<T>(pub T);

/// A script's arguments.
pub(super) trait Args {
    /// The names of its values in order, as the script's `ARGV:` line writes them.
    fn shape() -> String;
    /// Its values, in order.
    fn push(&self, inv: &mut ScriptInvocation<'_>);
}

/// A field of a script's arguments.
pub(super) trait ArgPart {
    fn shape(name: &str) -> String;
    fn push(&self, inv: &mut ScriptInvocation<'_>);
}

/// A type sent as one argument.
pub(super) trait ArgValue: ToRedisArgs {}
impl ArgValue for String {}
impl ArgValue for &'static str {}
impl ArgValue for u64 {}
impl ArgValue for i64 {}
impl ArgValue for u32 {}
impl ArgValue for usize {}

impl<T: ArgValue> ArgPart for T {
    fn shape(name: &str) -> String {
        name.to_owned()
    }
    fn push(&self, inv: &mut ScriptInvocation<'_>) {
        inv.arg(self);
    }
}

impl<T: ArgValue> ArgPart for Rest<T> {
    fn shape(name: &str) -> String {
        format!("{name}...")
    }
    fn push(&self, inv: &mut ScriptInvocation<'_>) {
        for v in &self.0 {
            inv.arg(v);
        }
    }
}

impl<T: Args> ArgPart for Each<T> {
    fn shape(name: &str) -> String {
        format!("{name}...: [{}]", T::shape())
    }
    fn push(&self, inv: &mut ScriptInvocation<'_>) {
        for v in &self.0 {
            v.push(inv);
        }
    }
}

/// A part whose items can be counted ([`Counted`]).
pub(super) trait Items {
    fn count(&self) -> usize;
}
impl<T> Items for Rest<T> {
    fn count(&self) -> usize {
        self.0.len()
    }
}
impl<T> Items for Each<T> {
    fn count(&self) -> usize {
        self.0.len()
    }
}

impl<P: ArgPart + Items> ArgPart for Counted<P> {
    fn shape(name: &str) -> String {
        format!("n_{name}, {}", P::shape(name))
    }
    fn push(&self, inv: &mut ScriptInvocation<'_>) {
        inv.arg(self.0.count());
        self.0.push(inv);
    }
}

/// A script's reply.
pub(super) trait Reply: Sized {
    /// The names of its values in order, as the script's `REPLY:` line writes them.
    fn shape() -> String;
    /// Takes its values from `values`.
    fn take(values: &mut Iter<'_, Value>) -> Result<Self, String>;

    /// The reply of one call: a script's array is its values; a single value (a count, a
    /// word) is a reply of one; nil is a reply of none.
    fn decode(reply: &Value) -> Result<Self, String> {
        let one = std::slice::from_ref(reply);
        let values = match reply {
            Value::Array(values) => values.as_slice(),
            Value::Nil => &[],
            _ => one,
        };
        let mut values = values.iter();
        let decoded = Self::take(&mut values)?;
        match values.len() {
            0 => Ok(decoded),
            n => Err(format!("{n} values more than `{}`", Self::shape())),
        }
    }
}

/// The reply of a script that answers nothing of use (nil, or a value no caller reads).
impl Reply for () {
    fn shape() -> String {
        "nothing".to_owned()
    }
    fn take(values: &mut Iter<'_, Value>) -> Result<Self, String> {
        values.by_ref().for_each(drop);
        Ok(())
    }
}

/// A field of a script's reply.
pub(super) trait ReplyPart: Sized {
    fn shape(name: &str) -> String;
    fn take(name: &str, values: &mut Iter<'_, Value>) -> Result<Self, String>;
}

/// A type read from one value of a reply (Redis's own conversions: a number from an
/// integer or from its digits, a text from a string or an integer).
pub(super) trait ReplyValue: FromRedisValue {}
impl ReplyValue for String {}
impl ReplyValue for u64 {}
impl ReplyValue for i64 {}
impl ReplyValue for f64 {}

fn value<T: FromRedisValue>(name: &str, v: &Value) -> Result<T, String> {
    T::from_redis_value_ref(v).map_err(|e| format!("`{name}` is {v:?}: {e}"))
}

impl<T: ReplyValue> ReplyPart for T {
    fn shape(name: &str) -> String {
        name.to_owned()
    }
    fn take(name: &str, values: &mut Iter<'_, Value>) -> Result<Self, String> {
        let v = values.next().ok_or_else(|| format!("no `{name}`"))?;
        value(name, v)
    }
}

impl<T: ReplyValue> ReplyPart for Option<T> {
    fn shape(name: &str) -> String {
        format!("{name}?")
    }
    fn take(name: &str, values: &mut Iter<'_, Value>) -> Result<Self, String> {
        values.next().map(|v| value(name, v)).transpose()
    }
}

impl<T: ReplyValue> ReplyPart for Rest<T> {
    fn shape(name: &str) -> String {
        format!("{name}...")
    }
    fn take(name: &str, values: &mut Iter<'_, Value>) -> Result<Self, String> {
        values
            .map(|v| value(name, v))
            .collect::<Result<_, _>>()
            .map(Rest)
    }
}

impl<T: Reply> ReplyPart for Each<T> {
    fn shape(name: &str) -> String {
        format!("{name}...: [{}]", T::shape())
    }
    fn take(_: &str, values: &mut Iter<'_, Value>) -> Result<Self, String> {
        let mut each = Vec::with_capacity(values.len());
        while values.len() > 0 {
            each.push(T::take(values)?);
        }
        Ok(Each(each))
    }
}

impl<T: Reply> ReplyPart for Nested<T> {
    fn shape(name: &str) -> String {
        format!("{name}: [{}]", T::shape())
    }
    fn take(name: &str, values: &mut Iter<'_, Value>) -> Result<Self, String> {
        let v = values.next().ok_or_else(|| format!("no `{name}`"))?;
        let Value::Array(_) = v else {
            return Err(format!("`{name}` is {v:?}, not an array"));
        };
        T::decode(v).map(Nested)
    }
}

impl ReplyPart for Vec<String> {
    fn shape(name: &str) -> String {
        format!("{name}[]")
    }
    fn take(name: &str, values: &mut Iter<'_, Value>) -> Result<Self, String> {
        let v = values.next().ok_or_else(|| format!("no `{name}`"))?;
        value(name, v)
    }
}

/// A script's arguments: a struct whose fields are its values in order (see the module doc).
macro_rules! args {
    ($(#[$m:meta])* struct $name:ident { $($(#[$fm:meta])* $field:ident: $ty:ty),* $(,)? }) => {
        $(#[$m])*
        pub(super) struct $name { $($(#[$fm])* pub $field: $ty),* }

        impl $crate::queue::redis_script::Args for $name {
            fn shape() -> String {
                let parts: &[String] = &[$(
                    <$ty as $crate::queue::redis_script::ArgPart>::shape(stringify!($field))
                ),*];
                if parts.is_empty() {
                    "none".to_owned()
                } else {
                    parts.join(", ")
                }
            }
            fn push(&self, _inv: &mut ::redis::ScriptInvocation<'_>) {
                $($crate::queue::redis_script::ArgPart::push(&self.$field, _inv);)*
            }
        }

        impl $crate::queue::redis_script::ArgPart for $name {
            fn shape(name: &str) -> String {
                format!("{name}: [{}]", <Self as $crate::queue::redis_script::Args>::shape())
            }
            fn push(&self, inv: &mut ::redis::ScriptInvocation<'_>) {
                $crate::queue::redis_script::Args::push(self, inv)
            }
        }
    };
}

/// A script's reply: a struct whose fields are its values in order (see the module doc).
macro_rules! reply {
    ($(#[$m:meta])* struct $name:ident { $($(#[$fm:meta])* $field:ident: $ty:ty),+ $(,)? }) => {
        $(#[$m])*
        pub(super) struct $name { $($(#[$fm])* pub $field: $ty),+ }

        impl $crate::queue::redis_script::Reply for $name {
            fn shape() -> String {
                let parts: &[String] = &[$(
                    <$ty as $crate::queue::redis_script::ReplyPart>::shape(stringify!($field))
                ),+];
                parts.join(", ")
            }
            fn take(values: &mut std::slice::Iter<'_, ::redis::Value>) -> Result<Self, String> {
                Ok($name {
                    $($field: <$ty as $crate::queue::redis_script::ReplyPart>::take(
                        stringify!($field),
                        values,
                    )?),+
                })
            }
        }
    };
}

pub(super) use {args, reply};

#[cfg(test)]
mod tests {
    use super::*;

    reply!(
        struct Lookup {
            owner: String,
            position: u64,
        }
    );
    reply!(
        struct Figures {
            waiting: i64,
            rate: f64,
            lookup: Each<Lookup>,
        }
    );
    reply!(
        struct Maybe {
            status: String,
            detail: Option<String>,
        }
    );

    fn bulk(s: &str) -> Value {
        Value::BulkString(s.as_bytes().to_vec())
    }

    #[test]
    fn a_reply_is_read_by_name_in_its_order() {
        let reply = Value::Array(vec![
            Value::Int(3),
            bulk("12.5"),
            bulk("u1"),
            Value::Int(1),
            bulk("u2"),
            Value::Int(2),
        ]);
        let figures = Figures::decode(&reply).unwrap();
        assert_eq!((figures.waiting, figures.rate), (3, 12.5));
        let lookups: Vec<_> = figures
            .lookup
            .0
            .iter()
            .map(|l| (l.owner.as_str(), l.position))
            .collect();
        assert_eq!(lookups, [("u1", 1), ("u2", 2)]);
        assert_eq!(
            Figures::shape(),
            "waiting, rate, lookup...: [owner, position]"
        );
    }

    #[test]
    fn a_reply_short_long_or_mistyped_is_refused_with_the_name() {
        let short = Value::Array(vec![Value::Int(3), bulk("1"), bulk("u1")]);
        assert!(Figures::decode(&short).err().unwrap().contains("position"));
        let mistyped = Value::Array(vec![Value::Int(3), bulk("fast")]);
        assert!(Figures::decode(&mistyped).err().unwrap().contains("rate"));
        let long = Value::Array(vec![bulk("held"), bulk("x"), bulk("y")]);
        assert!(Maybe::decode(&long).is_err());
        let bare = Maybe::decode(&Value::SimpleString("wrong_kind".into())).unwrap();
        assert_eq!((bare.status.as_str(), bare.detail), ("wrong_kind", None));
    }
}
