//! `Timestamp`: microseconds since the Unix epoch, stored as an integer, shown as RFC 3339 UTC.

use serde::{Serialize, Serializer};
use time::OffsetDateTime;
use time::format_description::well_known::Rfc3339;

/// A point in time with microsecond precision.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Timestamp(i64);

impl Timestamp {
    pub fn now() -> Self {
        let nanos = OffsetDateTime::now_utc().unix_timestamp_nanos();
        Self(i64::try_from(nanos / 1_000).unwrap_or(i64::MAX))
    }

    pub fn from_micros(micros: i64) -> Self {
        Self(micros)
    }

    /// Whole seconds since the Unix epoch (upstream APIs); `None` when out of range.
    pub fn from_unix_secs(secs: i64) -> Option<Self> {
        secs.checked_mul(1_000_000).map(Self)
    }

    pub fn micros(self) -> i64 {
        self.0
    }

    /// This time plus whole days (saturating).
    pub fn plus_days(self, days: u32) -> Self {
        Self(self.0.saturating_add(i64::from(days) * 86_400 * 1_000_000))
    }

    pub fn plus_secs(self, secs: u64) -> Self {
        let secs = i64::try_from(secs).unwrap_or(i64::MAX);
        Self(self.0.saturating_add(secs.saturating_mul(1_000_000)))
    }

    /// This time plus a duration (saturating).
    pub fn plus(self, duration: std::time::Duration) -> Self {
        let micros = i64::try_from(duration.as_micros()).unwrap_or(i64::MAX);
        Self(self.0.saturating_add(micros))
    }

    /// RFC 3339 in UTC with whole seconds, e.g. `2026-11-22T10:00:00Z`.
    pub fn to_rfc3339(self) -> String {
        let secs = self.0.div_euclid(1_000_000);
        OffsetDateTime::from_unix_timestamp(secs)
            .ok()
            .and_then(|t| t.format(&Rfc3339).ok())
            .unwrap_or_else(|| "1970-01-01T00:00:00Z".to_owned())
    }

    /// The IMF-fixdate of HTTP (`Last-Modified`), e.g. `Sun, 22 Nov 2026 10:00:00 GMT`.
    pub fn to_http_date(self) -> String {
        let secs = self.0.div_euclid(1_000_000);
        OffsetDateTime::from_unix_timestamp(secs)
            .ok()
            .and_then(|t| t.format(HTTP_DATE).ok())
            .unwrap_or_else(|| "Thu, 01 Jan 1970 00:00:00 GMT".to_owned())
    }

    /// Parse an IMF-fixdate (`If-Modified-Since`); `None` for anything else.
    pub fn from_http_date(text: &str) -> Option<Self> {
        let parsed = time::PrimitiveDateTime::parse(text.trim(), HTTP_DATE).ok()?;
        Self::from_unix_secs(parsed.assume_utc().unix_timestamp())
    }

    /// The same time cut to whole seconds, the precision of HTTP dates.
    pub fn whole_secs(self) -> Self {
        Self(self.0 - self.0.rem_euclid(1_000_000))
    }
}

/// `Sun, 22 Nov 2026 10:00:00 GMT` (RFC 9110 IMF-fixdate).
const HTTP_DATE: &[time::format_description::BorrowedFormatItem<'static>] = time::macros::format_description!(
    "[weekday repr:short], [day] [month repr:short] [year] [hour]:[minute]:[second] GMT"
);

impl utoipa::PartialSchema for Timestamp {
    fn schema() -> utoipa::openapi::RefOr<utoipa::openapi::schema::Schema> {
        utoipa::openapi::ObjectBuilder::new()
            .schema_type(utoipa::openapi::schema::Type::String)
            .format(Some(utoipa::openapi::SchemaFormat::KnownFormat(
                utoipa::openapi::KnownFormat::DateTime,
            )))
            .description(Some("RFC 3339 UTC timestamp"))
            .into()
    }
}

impl utoipa::ToSchema for Timestamp {}

impl Serialize for Timestamp {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_str(&self.to_rfc3339())
    }
}

impl<'de> serde::Deserialize<'de> for Timestamp {
    /// From RFC 3339 (what `Serialize` writes), for values kept as JSON.
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let text = String::deserialize(deserializer)?;
        let parsed =
            time::OffsetDateTime::parse(&text, &time::format_description::well_known::Rfc3339)
                .map_err(serde::de::Error::custom)?;
        let micros = parsed.unix_timestamp_nanos() / 1_000;
        i64::try_from(micros)
            .map(Self)
            .map_err(|_| serde::de::Error::custom("timestamp out of range"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn timestamps_render_as_rfc3339_utc_with_whole_seconds() {
        let t = Timestamp::from_micros(1_795_341_600_123_456);
        assert_eq!(t.to_rfc3339(), "2026-11-22T10:00:00Z");
    }

    #[test]
    fn http_dates_round_trip_at_whole_seconds() {
        let t = Timestamp::from_micros(1_795_341_600_123_456);
        assert_eq!(t.to_http_date(), "Sun, 22 Nov 2026 10:00:00 GMT");
        assert_eq!(
            Timestamp::from_http_date("Sun, 22 Nov 2026 10:00:00 GMT"),
            Some(t.whole_secs())
        );
        assert_eq!(Timestamp::from_http_date("yesterday"), None);
        assert_eq!(Timestamp::from_http_date(""), None);
    }

    #[test]
    fn rfc3339_reads_back() {
        let t = Timestamp::from_micros(1_795_341_600_000_000);
        let json = serde_json::to_string(&t).expect("json");
        assert_eq!(serde_json::from_str::<Timestamp>(&json).expect("read"), t);
        assert!(serde_json::from_str::<Timestamp>("\"yesterday\"").is_err());
    }

    #[test]
    fn adding_days_moves_forward() {
        let t = Timestamp::from_micros(0).plus_days(1);
        assert_eq!(t.to_rfc3339(), "1970-01-02T00:00:00Z");
    }
}
