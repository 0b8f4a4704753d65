//! The store's clock: the `ts` of events and the `created_at`/`ended_at` of records.
//! Only formatting lives here; the cost query's bounds are formatted the same way.

use time::OffsetDateTime;

/// Now, as RFC 3339 UTC with exactly three fractional digits (`2026-01-02T03:04:05.678Z`),
/// so that stored timestamps have one width and sort as text.
pub(crate) fn now() -> String {
    format_rfc3339_millis(OffsetDateTime::now_utc())
}

/// `t` in the stored form: RFC 3339, UTC, exactly three fractional digits.
pub(crate) fn format_rfc3339_millis(t: OffsetDateTime) -> String {
    let t = t.to_offset(time::UtcOffset::UTC);
    format!(
        "{:04}-{:02}-{:02}T{:02}:{:02}:{:02}.{:03}Z",
        t.year(),
        u8::from(t.month()),
        t.day(),
        t.hour(),
        t.minute(),
        t.second(),
        t.millisecond()
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn formats_utc_with_milliseconds_and_parses_as_rfc3339() {
        let t = OffsetDateTime::from_unix_timestamp_nanos(1_767_323_045_078_900_000)
            .expect("valid instant");
        let s = format_rfc3339_millis(t);
        assert_eq!(s, "2026-01-02T03:04:05.078Z");
        let back = OffsetDateTime::parse(&s, &time::format_description::well_known::Rfc3339)
            .expect("RFC 3339");
        assert_eq!(back.unix_timestamp_nanos(), 1_767_323_045_078_000_000);
        assert_eq!(now().len(), s.len());
    }
}
