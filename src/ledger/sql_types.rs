//! The values the SQL ledger binds and reads the same way on both dialects, each stored as its
//! database's natural column: a time is a `timestamptz` on PostgreSQL (for the people who query
//! it) and Unix milliseconds on SQLite; a list of seat ids is a `text[]` on PostgreSQL and a
//! JSON array on SQLite. A shared statement binds these, so it reads the same on both.

use chrono::{DateTime, Utc};
use sqlx::encode::IsNull;
use sqlx::error::BoxDynError;
use sqlx::postgres::{PgArgumentBuffer, PgTypeInfo, PgValueRef};
use sqlx::sqlite::{SqliteArgumentValue, SqliteTypeInfo, SqliteValueRef};
use sqlx::{Decode, Encode, Postgres, Sqlite, Type};

/// A point in time as a ledger column.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct At(pub DateTime<Utc>);

impl At {
    /// An optional time as an optional column.
    pub fn of(t: Option<DateTime<Utc>>) -> Option<At> {
        t.map(At)
    }
}

impl Type<Postgres> for At {
    fn type_info() -> PgTypeInfo {
        <DateTime<Utc> as Type<Postgres>>::type_info()
    }
}

impl Encode<'_, Postgres> for At {
    fn encode_by_ref(&self, buf: &mut PgArgumentBuffer) -> Result<IsNull, BoxDynError> {
        <DateTime<Utc> as Encode<Postgres>>::encode_by_ref(&self.0, buf)
    }
}

impl<'r> Decode<'r, Postgres> for At {
    fn decode(value: PgValueRef<'r>) -> Result<Self, BoxDynError> {
        <DateTime<Utc> as Decode<Postgres>>::decode(value).map(At)
    }
}

impl Type<Sqlite> for At {
    fn type_info() -> SqliteTypeInfo {
        <i64 as Type<Sqlite>>::type_info()
    }
    fn compatible(ty: &SqliteTypeInfo) -> bool {
        <i64 as Type<Sqlite>>::compatible(ty)
    }
}

impl<'q> Encode<'q, Sqlite> for At {
    fn encode_by_ref(
        &self,
        args: &mut Vec<SqliteArgumentValue<'q>>,
    ) -> Result<IsNull, BoxDynError> {
        args.push(SqliteArgumentValue::Int64(self.0.timestamp_millis()));
        Ok(IsNull::No)
    }
}

impl<'r> Decode<'r, Sqlite> for At {
    fn decode(value: SqliteValueRef<'r>) -> Result<Self, BoxDynError> {
        let ms = <i64 as Decode<Sqlite>>::decode(value)?;
        DateTime::from_timestamp_millis(ms)
            .map(At)
            .ok_or_else(|| format!("{ms} ms is out of range for a time").into())
    }
}

/// A list of seat (unit) ids as one parameter: a statement reads it as rows through the
/// dialect's `each_text!` (`unnest` on PostgreSQL, `json_each` on SQLite).
#[derive(Debug, Clone, Copy)]
pub struct TextList<'a>(pub &'a [String]);

impl Type<Postgres> for TextList<'_> {
    fn type_info() -> PgTypeInfo {
        <Vec<String> as Type<Postgres>>::type_info()
    }
}

impl Encode<'_, Postgres> for TextList<'_> {
    fn encode_by_ref(&self, buf: &mut PgArgumentBuffer) -> Result<IsNull, BoxDynError> {
        <&[String] as Encode<Postgres>>::encode_by_ref(&self.0, buf)
    }
}

impl Type<Sqlite> for TextList<'_> {
    fn type_info() -> SqliteTypeInfo {
        <String as Type<Sqlite>>::type_info()
    }
}

impl<'q> Encode<'q, Sqlite> for TextList<'_> {
    fn encode_by_ref(
        &self,
        args: &mut Vec<SqliteArgumentValue<'q>>,
    ) -> Result<IsNull, BoxDynError> {
        let json = serde_json::to_string(self.0)?;
        args.push(SqliteArgumentValue::Text(json.into()));
        Ok(IsNull::No)
    }
}

/// A list of ids (attempts, outbox rows) as one parameter: a statement matches a column
/// against it with the dialect's `in_ids!` — `= ANY(…)` over a `uuid[]` on PostgreSQL, `IN`
/// the ids of a JSON array of hex strings on SQLite (whose ids are 16-byte blobs).
#[derive(Debug, Clone, Copy)]
pub struct Ids<'a>(pub &'a [uuid::Uuid]);

impl Type<Postgres> for Ids<'_> {
    fn type_info() -> PgTypeInfo {
        <Vec<uuid::Uuid> as Type<Postgres>>::type_info()
    }
}

impl Encode<'_, Postgres> for Ids<'_> {
    fn encode_by_ref(&self, buf: &mut PgArgumentBuffer) -> Result<IsNull, BoxDynError> {
        <&[uuid::Uuid] as Encode<Postgres>>::encode_by_ref(&self.0, buf)
    }
}

impl Type<Sqlite> for Ids<'_> {
    fn type_info() -> SqliteTypeInfo {
        <String as Type<Sqlite>>::type_info()
    }
}

impl<'q> Encode<'q, Sqlite> for Ids<'_> {
    fn encode_by_ref(
        &self,
        args: &mut Vec<SqliteArgumentValue<'q>>,
    ) -> Result<IsNull, BoxDynError> {
        let hex: Vec<String> = self.0.iter().map(|id| id.simple().to_string()).collect();
        args.push(SqliteArgumentValue::Text(
            serde_json::to_string(&hex)?.into(),
        ));
        Ok(IsNull::No)
    }
}

/// A stored list of seat ids, read back (`holds.seat_ids`).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Seats(pub Vec<String>);

impl Type<Postgres> for Seats {
    fn type_info() -> PgTypeInfo {
        <Vec<String> as Type<Postgres>>::type_info()
    }
}

impl<'r> Decode<'r, Postgres> for Seats {
    fn decode(value: PgValueRef<'r>) -> Result<Self, BoxDynError> {
        <Vec<String> as Decode<Postgres>>::decode(value).map(Seats)
    }
}

impl Type<Sqlite> for Seats {
    fn type_info() -> SqliteTypeInfo {
        <String as Type<Sqlite>>::type_info()
    }
}

impl<'r> Decode<'r, Sqlite> for Seats {
    fn decode(value: SqliteValueRef<'r>) -> Result<Self, BoxDynError> {
        let text = <&str as Decode<Sqlite>>::decode(value)?;
        Ok(Seats(serde_json::from_str(text)?))
    }
}
