//! `time_window`: the days and hours, in an IANA time zone, when selected requests are
//! allowed; outside them they are denied. Local time comes from jiff's bundled tz
//! database, so a window follows daylight-saving changes (09:00 Berlin is 08:00 UTC in
//! winter and 07:00 UTC in summer) and means the same on every host.

use std::fmt;

use jiff::Timestamp;
use jiff::tz::TimeZone;
use serde::{Deserialize, Deserializer};

/// Local days and hours in a zone.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TimeWindow {
    /// The zone the days and hours are read in.
    pub timezone: Zone,
    /// Allowed local weekdays; all seven when the file names none.
    pub days: Vec<Day>,
    /// Allowed local time of day; the whole day when the file names none.
    pub hours: HourRange,
}

impl TimeWindow {
    /// Whether the instant falls inside: its local weekday is allowed and its local
    /// time of day is in `hours`. An overnight range (`22:00-06:00`) is read within
    /// each allowed day: 23:00 and 05:00 of an allowed day are both inside.
    pub fn contains(&self, at: Timestamp) -> bool {
        let local = at.to_zoned(self.timezone.tz.clone());
        let day = Day::from_monday_offset(local.weekday().to_monday_zero_offset());
        let minute =
            u16::try_from(i32::from(local.hour()) * 60 + i32::from(local.minute())).unwrap_or(0);
        self.days.contains(&day) && self.hours.contains(minute)
    }

    /// A short human summary, e.g. `mon,tue 09:00-17:00 Europe/Berlin`.
    pub fn summary(&self) -> String {
        let days: Vec<&str> = self.days.iter().map(|d| d.as_str()).collect();
        format!("{} {} {}", days.join(","), self.hours, self.timezone.name)
    }
}

/// An IANA time zone, validated against the bundled database at parse.
#[derive(Debug, Clone)]
pub struct Zone {
    name: String,
    tz: TimeZone,
}

impl Zone {
    /// Looks a zone up by IANA name (`Europe/Berlin`, `UTC`).
    pub fn get(name: &str) -> Result<Self, String> {
        TimeZone::get(name)
            .map(|tz| Self {
                name: name.to_owned(),
                tz,
            })
            .map_err(|_| format!("`{}` is not an IANA time zone", name.escape_debug()))
    }

    /// UTC, the default zone of budgets.
    pub fn utc() -> Self {
        Self {
            name: "UTC".into(),
            tz: TimeZone::UTC,
        }
    }

    /// The name as written in the policy.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The zone, for calendar arithmetic.
    pub fn tz(&self) -> &TimeZone {
        &self.tz
    }
}

impl PartialEq for Zone {
    fn eq(&self, other: &Self) -> bool {
        self.name == other.name
    }
}

impl Eq for Zone {}

impl<'de> Deserialize<'de> for Zone {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        super::scalar::parse_str(deserializer, Zone::get)
    }
}

/// A weekday, written `mon` … `sun` (or in full, any case).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[allow(missing_docs)] // The seven days need no explanation.
pub enum Day {
    Mon,
    Tue,
    Wed,
    Thu,
    Fri,
    Sat,
    Sun,
}

impl Day {
    /// All seven days, Monday first.
    pub const ALL: [Day; 7] = [
        Day::Mon,
        Day::Tue,
        Day::Wed,
        Day::Thu,
        Day::Fri,
        Day::Sat,
        Day::Sun,
    ];

    fn from_monday_offset(offset: i8) -> Self {
        Self::ALL[usize::try_from(offset).unwrap_or(0) % 7]
    }

    /// The short lowercase name.
    pub fn as_str(self) -> &'static str {
        match self {
            Day::Mon => "mon",
            Day::Tue => "tue",
            Day::Wed => "wed",
            Day::Thu => "thu",
            Day::Fri => "fri",
            Day::Sat => "sat",
            Day::Sun => "sun",
        }
    }
}

impl<'de> Deserialize<'de> for Day {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        super::scalar::parse_str(deserializer, Day::parse)
    }
}

impl Day {
    /// Parses `mon` or `monday`, any case.
    pub fn parse(text: &str) -> Result<Self, String> {
        const FULL: [&str; 7] = [
            "monday",
            "tuesday",
            "wednesday",
            "thursday",
            "friday",
            "saturday",
            "sunday",
        ];
        let lower = text.to_ascii_lowercase();
        Day::ALL
            .into_iter()
            .zip(FULL)
            .find(|(d, full)| lower == d.as_str() || lower == *full)
            .map(|(d, _)| d)
            .ok_or_else(|| {
                format!(
                    "`{}` is not a day (mon, tue, wed, thu, fri, sat, sun)",
                    text.escape_debug()
                )
            })
    }
}

/// A local time-of-day range `HH:MM-HH:MM`, start inclusive, end exclusive, in minutes
/// since midnight. `end` may be `24:00`; `end < start` wraps past midnight.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct HourRange {
    /// Minutes since local midnight, 0..1440.
    pub start: u16,
    /// Minutes since local midnight, 1..=1440, never equal to `start`.
    pub end: u16,
}

impl HourRange {
    /// The whole day.
    pub const ALL_DAY: HourRange = HourRange {
        start: 0,
        end: 1440,
    };

    /// Parses `HH:MM-HH:MM`; the message says what is wrong.
    pub fn parse(text: &str) -> Result<Self, String> {
        let bad = || format!("`{}` is not a range like 09:00-17:00", text.escape_debug());
        let (a, b) = text.trim().split_once('-').ok_or_else(bad)?;
        let start = clock(a.trim()).ok_or_else(bad)?;
        let end = clock(b.trim()).ok_or_else(bad)?;
        if start == 1440 {
            return Err(bad());
        }
        if start == end {
            return Err(format!("`{text}` is an empty range"));
        }
        Ok(Self { start, end })
    }

    /// Whether a local minute of the day is inside.
    pub fn contains(self, minute: u16) -> bool {
        if self.start < self.end {
            self.start <= minute && minute < self.end
        } else {
            minute >= self.start || minute < self.end
        }
    }
}

impl fmt::Display for HourRange {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{:02}:{:02}-{:02}:{:02}",
            self.start / 60,
            self.start % 60,
            self.end / 60,
            self.end % 60
        )
    }
}

/// `HH:MM` to minutes since midnight; `24:00` is allowed as an end.
fn clock(text: &str) -> Option<u16> {
    let (h, m) = text.split_once(':')?;
    if h.is_empty() || h.len() > 2 || m.len() != 2 {
        return None;
    }
    let h: u16 = h.parse().ok()?;
    let m: u16 = m.parse().ok()?;
    if m >= 60 || h > 24 || (h == 24 && m != 0) {
        return None;
    }
    Some(h * 60 + m)
}

impl<'de> Deserialize<'de> for HourRange {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        super::scalar::parse_str(deserializer, HourRange::parse)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn window(zone: &str, days: &[Day], hours: &str) -> TimeWindow {
        TimeWindow {
            timezone: Zone::get(zone).unwrap(),
            days: days.to_vec(),
            hours: HourRange::parse(hours).unwrap(),
        }
    }

    fn at(text: &str) -> Timestamp {
        text.parse().unwrap()
    }

    #[test]
    fn ranges_parse_and_refuse_nonsense() {
        assert_eq!(
            HourRange::parse("09:00-17:30").unwrap(),
            HourRange {
                start: 540,
                end: 1050
            }
        );
        assert_eq!(HourRange::parse("00:00-24:00").unwrap(), HourRange::ALL_DAY);
        for bad in [
            "",
            "9-17",
            "09:00",
            "09:00-09:00",
            "25:00-26:00",
            "09:60-10:00",
            "24:00-01:00",
            "aa:bb-cc:dd",
        ] {
            assert!(HourRange::parse(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn overnight_ranges_wrap() {
        let r = HourRange::parse("22:00-06:00").unwrap();
        assert!(r.contains(23 * 60));
        assert!(r.contains(5 * 60 + 59));
        assert!(!r.contains(6 * 60));
        assert!(!r.contains(12 * 60));
    }

    #[test]
    fn unknown_zones_are_refused() {
        assert!(Zone::get("Europe/Berlin").is_ok());
        assert!(Zone::get("Mars/Olympus_Mons").is_err());
        assert!(Zone::get("").is_err());
    }

    #[test]
    fn spring_forward_in_berlin_moves_the_window_an_hour_earlier_in_utc() {
        // 2026-03-29 02:00 CET jumps to 03:00 CEST: 09:00 local is 08:00Z the day
        // before and 07:00Z on the day.
        let w = window("Europe/Berlin", &Day::ALL, "09:00-17:00");
        assert!(
            !w.contains(at("2026-03-28T07:30:00Z")),
            "08:30 CET is before 09:00"
        );
        assert!(w.contains(at("2026-03-28T08:00:00Z")), "09:00 CET");
        assert!(w.contains(at("2026-03-29T07:30:00Z")), "09:30 CEST");
        assert!(!w.contains(at("2026-03-29T06:59:00Z")), "08:59 CEST");
        assert!(w.contains(at("2026-03-29T14:59:00Z")), "16:59 CEST");
        assert!(!w.contains(at("2026-03-29T15:00:00Z")), "17:00 CEST");
    }

    #[test]
    fn fall_back_in_berlin_moves_the_window_an_hour_later_in_utc() {
        // 2026-10-25 03:00 CEST falls back to 02:00 CET.
        let w = window("Europe/Berlin", &Day::ALL, "09:00-17:00");
        assert!(w.contains(at("2026-10-24T07:00:00Z")), "09:00 CEST");
        assert!(!w.contains(at("2026-10-25T07:30:00Z")), "08:30 CET");
        assert!(w.contains(at("2026-10-25T08:00:00Z")), "09:00 CET");
        assert!(w.contains(at("2026-10-25T15:59:00Z")), "16:59 CET");
        assert!(!w.contains(at("2026-10-25T16:00:00Z")), "17:00 CET");
    }

    #[test]
    fn the_repeated_hour_of_fall_back_is_inside_a_night_window_both_times() {
        let w = window("Europe/Berlin", &[Day::Sun], "02:00-03:00");
        assert!(w.contains(at("2026-10-25T00:30:00Z")), "02:30 CEST");
        assert!(w.contains(at("2026-10-25T01:30:00Z")), "02:30 CET");
        assert!(!w.contains(at("2026-10-25T02:00:00Z")), "03:00 CET");
    }

    #[test]
    fn days_are_local_days() {
        // Saturday 00:30 in Berlin is still Friday 23:30 in UTC.
        let w = window(
            "Europe/Berlin",
            &[Day::Mon, Day::Tue, Day::Wed, Day::Thu, Day::Fri],
            "00:00-24:00",
        );
        assert!(w.contains(at("2026-11-27T22:30:00Z")), "fri 23:30 local");
        assert!(!w.contains(at("2026-11-27T23:30:00Z")), "sat 00:30 local");
    }
}
