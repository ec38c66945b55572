//! Standard 5-field cron expressions (`M H DoM Mon DoW`) in local time, as
//! Claude Code's CronCreate takes them: `*`, numbers, ranges `a-b`, steps
//! `*/n` and `a-b/n`, lists `a,b`, month and weekday names (`jan`, `mon`),
//! weekday 7 as Sunday. When both day fields are restricted, a day matching
//! either matches (as cron has always done).

#[cfg(test)]
use chrono::NaiveDateTime;
use chrono::{DateTime, Datelike, Duration, Local, NaiveDate, TimeZone, Timelike};

/// A parsed expression: the allowed values of each field.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Cron {
    minutes: u64,
    hours: u32,
    days: u32,
    months: u16,
    weekdays: u8,
    days_any: bool,
    weekdays_any: bool,
}

/// How far ahead a next firing is looked for (a leap day, every 8 years at
/// worst): an expression with none in that time never fires.
const HORIZON_DAYS: i64 = 8 * 366;

const MONTHS: [&str; 12] = ["jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct", "nov", "dec"];
const WEEKDAYS: [&str; 7] = ["sun", "mon", "tue", "wed", "thu", "fri", "sat"];

fn field(text: &str, min: u32, max: u32, names: &[&str], what: &str) -> Result<(u64, bool), String> {
    let value = |v: &str| -> Result<u32, String> {
        if let Some(i) = names.iter().position(|n| n.eq_ignore_ascii_case(v)) {
            return Ok(i as u32 + min);
        }
        let n: u32 = v
            .parse()
            .ok()
            .filter(|_| v.bytes().all(|b| b.is_ascii_digit()))
            .ok_or_else(|| format!("{what}: {v:?} is not a number"))?;
        if n < min || n > max {
            return Err(format!("{what}: {n} is not between {min} and {max}"));
        }
        Ok(n)
    };
    let mut bits = 0u64;
    for part in text.split(',') {
        let (range, step) = match part.split_once('/') {
            Some((r, s)) => {
                let s: u32 = s
                    .parse()
                    .ok()
                    .filter(|_| s.bytes().all(|b| b.is_ascii_digit()))
                    .ok_or_else(|| format!("{what}: step {s:?} is not a number"))?;
                if s == 0 {
                    return Err(format!("{what}: a step of 0"));
                }
                (r, s)
            }
            None => (part, 1),
        };
        let (from, to) = match range {
            "*" => (min, max),
            r => match r.split_once('-') {
                Some((a, b)) => (value(a)?, value(b)?),
                None if step > 1 => (value(r)?, max),
                None => {
                    let v = value(r)?;
                    (v, v)
                }
            },
        };
        if from > to {
            return Err(format!("{what}: the range {range} runs backwards"));
        }
        // A step past the field's end (`*/4294967295`) leaves its start.
        let mut v = Some(from);
        while let Some(at) = v.filter(|at| *at <= to) {
            bits |= 1 << at;
            v = at.checked_add(step);
        }
    }
    Ok((bits, text == "*"))
}

impl Cron {
    /// Parses `text`, or says what is wrong with it.
    pub fn parse(text: &str) -> Result<Cron, String> {
        let fields: Vec<&str> = text.split_whitespace().collect();
        let [m, h, dom, mon, dow] = fields[..] else {
            return Err(format!(
                "{} fields; a cron expression has 5: minute hour day-of-month month day-of-week",
                fields.len()
            ));
        };
        let (minutes, _) = field(m, 0, 59, &[], "minute")?;
        let (hours, _) = field(h, 0, 23, &[], "hour")?;
        let (days, days_any) = field(dom, 1, 31, &[], "day of month")?;
        let (months, _) = field(mon, 1, 12, &MONTHS, "month")?;
        let (mut weekdays, weekdays_any) = field(dow, 0, 7, &WEEKDAYS, "day of week")?;
        if weekdays & (1 << 7) != 0 {
            weekdays |= 1;
        }
        Ok(Cron {
            minutes,
            hours: hours as u32,
            days: days as u32,
            months: months as u16,
            weekdays: (weekdays & 0x7f) as u8,
            days_any,
            weekdays_any,
        })
    }

    fn day_matches(&self, date: NaiveDate) -> bool {
        if self.months & (1 << date.month()) == 0 {
            return false;
        }
        let dom = self.days & (1 << date.day()) != 0;
        let dow = self.weekdays & (1 << date.weekday().num_days_from_sunday()) != 0;
        match (self.days_any, self.weekdays_any) {
            (true, true) => true,
            (false, true) => dom,
            (true, false) => dow,
            (false, false) => dom || dow,
        }
    }

    /// The first minute after `after` that matches, in local time; `None`
    /// when none comes within eight years. The search runs over local
    /// wall-clock times (never a `DateTime<Local>`'s own arithmetic, which
    /// has no answer in a repeated hour): a time a daylight-saving change
    /// skips does not fire; one it repeats fires at its first instant.
    pub fn next_after(&self, after: DateTime<Local>) -> Option<DateTime<Local>> {
        use chrono::LocalResult;
        let wall = after.naive_local();
        let from = wall.date().and_hms_opt(wall.hour(), wall.minute(), 0)?;
        let mut date = from.date();
        for _ in 0..HORIZON_DAYS {
            if self.day_matches(date) {
                for hour in (0..24).filter(|h| self.hours & (1 << h) != 0) {
                    for minute in (0..60).filter(|m| self.minutes & (1 << m) != 0) {
                        let Some(naive) = date.and_hms_opt(hour, minute, 0) else { continue };
                        // Within an hour of `after`'s wall time (a repeated
                        // hour runs the clock back).
                        if naive + Duration::hours(2) <= from {
                            continue;
                        }
                        let at = match Local.from_local_datetime(&naive) {
                            LocalResult::Single(t) => t,
                            LocalResult::Ambiguous(a, b) => a.min(b),
                            LocalResult::None => continue,
                        };
                        if at > after {
                            return Some(at);
                        }
                    }
                }
            }
            date = date.succ_opt()?;
        }
        None
    }
}

/// In words, roughly: `every 5 minutes`, `at 14:30`, else the expression.
pub fn describe(text: &str) -> String {
    let f: Vec<&str> = text.split_whitespace().collect();
    match f[..] {
        ["*", "*", "*", "*", "*"] => "every minute".into(),
        [m, "*", "*", "*", "*"]
            if m.strip_prefix("*/")
                .and_then(|n| n.parse::<u32>().ok())
                .is_some_and(|n| n > 0 && n < 60 && 60 % n == 0) =>
        {
            format!("every {} minutes", &m[2..])
        }
        [m, h, "*", "*", "*"] if m.parse::<u32>().is_ok() && h.parse::<u32>().is_ok() => {
            format!("every day at {h:0>2}:{m:0>2}")
        }
        [m, h, d, mo, "*"] if [m, h, d, mo].iter().all(|x| x.parse::<u32>().is_ok()) => {
            format!("on {d}/{mo} at {h:0>2}:{m:0>2}")
        }
        _ => format!("cron {text}"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(y: i32, mo: u32, d: u32, h: u32, mi: u32) -> DateTime<Local> {
        Local.from_local_datetime(&NaiveDate::from_ymd_opt(y, mo, d).unwrap().and_hms_opt(h, mi, 0).unwrap()).unwrap()
    }

    #[test]
    fn expressions_fire_when_cron_would() {
        let next = |e: &str, from| Cron::parse(e).unwrap().next_after(from).unwrap();
        let t = at(2026, 12, 7, 13, 49);
        assert_eq!(next("*/5 * * * *", t), at(2026, 12, 7, 13, 50));
        assert_eq!(next("* * * * *", t), at(2026, 12, 7, 13, 50));
        assert_eq!(next("30 14 * * *", t), at(2026, 12, 7, 14, 30));
        assert_eq!(next("30 9 * * *", t), at(2026, 12, 8, 9, 30));
        assert_eq!(next("0 0 1 jan *", t), at(2027, 1, 1, 0, 0));
        assert_eq!(next("0 9 * * mon-fri", at(2026, 12, 11, 10, 0)), at(2026, 12, 14, 9, 0), "Friday to Monday");
        assert_eq!(next("0 9 * * 7", t), at(2026, 12, 13, 9, 0), "7 is Sunday");
        assert_eq!(next("0 0 29 2 *", t), at(2028, 2, 29, 0, 0), "a leap day");
        assert_eq!(next("0 0 13 * 5", t), at(2026, 12, 11, 0, 0), "day of month OR day of week");
        assert_eq!(next("15,45 */6 * * *", t), at(2026, 12, 7, 18, 15));
        assert!(Cron::parse("0 0 31 2 *").unwrap().next_after(t).is_none(), "never");
        for bad in [
            "* * * *",
            "60 * * * *",
            "* 24 * * *",
            "*/0 * * * *",
            "5-1 * * * *",
            "x * * * *",
            "* * 0 * *",
            "+5 * * * *",
        ] {
            assert!(Cron::parse(bad).is_err(), "{bad}");
        }
        // A step past the end leaves the start (no overflow, no wrap).
        assert_eq!(next("1-59/4294967295 * * * *", t), at(2026, 12, 7, 14, 1));
        assert_eq!(next("0 23/4294967295 * * *", t), at(2026, 12, 7, 23, 0));
        assert_eq!(describe("*/90 * * * *"), "cron */90 * * * *");
        assert_eq!(describe("*/5 * * * *"), "every 5 minutes");
    }

    /// Daylight saving: in a repeated hour a schedule goes on (it fired
    /// at the first 01:30 and fires at 01:35, and on through the repeat).
    /// The zone is the process's, so the test runs itself again in a
    /// process of its own with `TZ=America/New_York` (Debian's tzdata).
    #[test]
    fn a_repeated_hour_keeps_a_schedule() {
        const NAME: &str = "schedule::cron::tests::a_repeated_hour_keeps_a_schedule";
        if std::env::var("TZ").as_deref() != Ok("America/New_York") {
            let out = std::process::Command::new(std::env::current_exe().unwrap())
                .args(["--exact", NAME, "--nocapture", "--test-threads", "1"])
                .env("TZ", "America/New_York")
                .output()
                .unwrap();
            let text = String::from_utf8_lossy(&out.stdout);
            assert!(
                out.status.success() && text.contains("1 passed"),
                "{text}{}",
                String::from_utf8_lossy(&out.stderr)
            );
            return;
        }
        let naive = |s: &str| NaiveDateTime::parse_from_str(s, "%Y-%m-%d %H:%M").unwrap();
        let first = match Local.from_local_datetime(&naive("2026-11-01 01:30")) {
            chrono::LocalResult::Ambiguous(a, b) => a.min(b),
            other => panic!("not a repeated hour here: {other:?}"),
        };
        let c = Cron::parse("*/5 * * * *").unwrap();
        let next = c.next_after(first).unwrap();
        assert_eq!(next.naive_local(), naive("2026-11-01 01:35"));
        let mut t = first;
        for _ in 0..40 {
            t = c.next_after(t).expect("never dropped in the repeated hour");
        }
    }
}
