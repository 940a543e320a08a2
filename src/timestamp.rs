//! `Timestamp`: microseconds since the Unix epoch, stored as an integer, shown as RFC 3339 UTC.

use serde::{Serialize, Serializer};
use time::OffsetDateTime;

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
        self.rfc3339().as_str().to_owned()
    }

    /// `to_rfc3339` without an allocation: every page of search results writes two per agent.
    /// Times outside the years 0000 to 9999, which RFC 3339 cannot write, read as the epoch.
    pub fn rfc3339(self) -> Rfc3339Text {
        let secs = self.0.div_euclid(1_000_000);
        let (days, of_day) = (secs.div_euclid(86_400), secs.rem_euclid(86_400));
        let (year, month, day) = civil_date(days);
        if !(0..=9999).contains(&year) {
            return Self(0).rfc3339();
        }
        let mut text = *b"0000-00-00T00:00:00Z";
        let mut put = |at: usize, value: i64, digits: usize| {
            let mut value = value;
            for place in (at..at + digits).rev() {
                text[place] = b'0' + (value % 10) as u8;
                value /= 10;
            }
        };
        put(0, year, 4);
        put(5, month, 2);
        put(8, day, 2);
        put(11, of_day / 3_600, 2);
        put(14, of_day / 60 % 60, 2);
        put(17, of_day % 60, 2);
        Rfc3339Text(text)
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
        serializer.serialize_str(self.rfc3339().as_str())
    }
}

/// A timestamp written in RFC 3339 (`Timestamp::rfc3339`), on the stack.
#[derive(Clone, Copy)]
pub struct Rfc3339Text([u8; 20]);

impl Rfc3339Text {
    pub fn as_str(&self) -> &str {
        // Only ASCII digits and separators are ever written.
        std::str::from_utf8(&self.0).unwrap_or("1970-01-01T00:00:00Z")
    }
}

/// The proleptic Gregorian (year, month, day) of a count of days since 1970-01-01. The
/// calendar repeats every 400 years (146,097 days); counted from a 1 March, each year's leap
/// day falls at its end, so the day of the year gives the month by a linear formula.
fn civil_date(days: i64) -> (i64, i64, i64) {
    // 719,468 days from 0000-03-01 to 1970-01-01.
    let days = days.saturating_add(719_468);
    let era = days.div_euclid(146_097);
    let of_era = days.rem_euclid(146_097);
    let year_of_era = (of_era - of_era / 1_460 + of_era / 36_524 - of_era / 146_096) / 365;
    let of_year = of_era - (365 * year_of_era + year_of_era / 4 - year_of_era / 100);
    // Months from March: 31, 30, 31, 30, 31 days, twice over, then January and February.
    let month_from_march = (5 * of_year + 2) / 153;
    let day = of_year - (153 * month_from_march + 2) / 5 + 1;
    let month = if month_from_march < 10 {
        month_from_march + 3
    } else {
        month_from_march - 9
    };
    let year = era * 400 + year_of_era + i64::from(month <= 2);
    (year, month, day)
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
    use time::format_description::well_known::Rfc3339;

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

    /// The hand-written calendar agrees with the `time` crate's RFC 3339 formatting, from the
    /// first second of year 0 to the last of 9999, leap days and century years included.
    #[test]
    fn rfc3339_agrees_with_the_time_crate() {
        let reference = |t: Timestamp| {
            OffsetDateTime::from_unix_timestamp(t.micros().div_euclid(1_000_000))
                .ok()
                .and_then(|t| t.format(&Rfc3339).ok())
                .unwrap_or_else(|| "1970-01-01T00:00:00Z".to_owned())
        };
        let first = -62_167_219_200_i64; // 0000-01-01T00:00:00Z
        let last = 253_402_300_799_i64; // 9999-12-31T23:59:59Z
        let mut secs: Vec<i64> = vec![
            first,
            last,
            0,
            -1,
            951_782_400,    // 2000-02-29
            4_107_542_400,  // 2100-03-01
            -2_203_891_200, // 1900-02-28
            1_795_341_599,
        ];
        // A fixed walk over the whole range, and the days around each year's start.
        let mut state = 0x9e37_79b9_7f4a_7c15_u64;
        for _ in 0..20_000 {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            secs.push(first + (state % (last - first + 1) as u64) as i64);
        }
        for year_start in (first..last).step_by(31_556_952) {
            secs.extend([year_start - 86_400, year_start, year_start + 86_399]);
        }
        for secs in secs {
            for micros in [secs * 1_000_000, secs * 1_000_000 + 999_999] {
                let t = Timestamp::from_micros(micros);
                assert_eq!(t.to_rfc3339(), reference(t), "{micros} µs");
            }
        }
        // Outside what RFC 3339 writes: the epoch, as before.
        for micros in [
            (first - 1) * 1_000_000,
            (last + 1) * 1_000_000,
            i64::MIN,
            i64::MAX,
        ] {
            let t = Timestamp::from_micros(micros);
            assert_eq!(t.to_rfc3339(), "1970-01-01T00:00:00Z", "{micros} µs");
            assert_eq!(reference(t), "1970-01-01T00:00:00Z", "{micros} µs");
        }
    }

    #[test]
    fn adding_days_moves_forward() {
        let t = Timestamp::from_micros(0).plus_days(1);
        assert_eq!(t.to_rfc3339(), "1970-01-02T00:00:00Z");
    }
}
