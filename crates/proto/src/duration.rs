//! Go-style duration strings (`500ms`, `1m30s`, `2h`), the format of `retryWait` in specs
//! and on the wire.

use std::time::Duration;

/// Why a duration string could not be read.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ParseError {
    #[error("empty duration; expected a number with a unit such as 500ms, 3s or 1m30s")]
    Empty,
    #[error("negative duration {0:?}; expected a duration of 0 or more")]
    Negative(String),
    #[error(
        "invalid duration {0:?}; expected a number with a unit (ns, us, ms, s, m, h) such as 500ms, 3s or 1m30s"
    )]
    Invalid(String),
    #[error(
        "missing unit in duration {0:?}; expected one of ns, us, ms, s, m, h (for example 500ms)"
    )]
    MissingUnit(String),
    #[error("unknown unit {unit:?} in duration {text:?}; expected one of ns, us, ms, s, m, h")]
    UnknownUnit { unit: String, text: String },
    #[error("duration {0:?} is too large")]
    Overflow(String),
}

/// Parses a Go duration string: a sequence of decimal numbers, each with an optional
/// fraction and a unit (`ns`, `us`, `µs`, `ms`, `s`, `m`, `h`), such as `1.5s` or `1h2m`.
/// `0` alone is allowed. Negative durations are refused.
pub fn parse(text: &str) -> Result<Duration, ParseError> {
    let invalid = || ParseError::Invalid(text.to_owned());
    let mut rest = text;
    if rest.is_empty() {
        return Err(ParseError::Empty);
    }
    if let Some(stripped) = rest.strip_prefix('+') {
        rest = stripped;
    } else if let Some(magnitude) = rest.strip_prefix('-') {
        if !magnitude.is_empty() && magnitude.chars().all(|c| c == '0' || c == '.') {
            return Ok(Duration::ZERO);
        }
        return Err(ParseError::Negative(text.to_owned()));
    }
    if rest == "0" {
        return Ok(Duration::ZERO);
    }
    if rest.is_empty() {
        return Err(invalid());
    }
    let mut total: u128 = 0;
    while !rest.is_empty() {
        let int_len = rest.bytes().take_while(u8::is_ascii_digit).count();
        let int_part = &rest[..int_len];
        rest = &rest[int_len..];
        let mut frac_part = "";
        if let Some(after_dot) = rest.strip_prefix('.') {
            let frac_len = after_dot.bytes().take_while(u8::is_ascii_digit).count();
            frac_part = &after_dot[..frac_len];
            rest = &after_dot[frac_len..];
        }
        if int_part.is_empty() && frac_part.is_empty() {
            return Err(invalid());
        }
        let unit_len = rest
            .char_indices()
            .find(|(_, c)| c.is_ascii_digit() || *c == '.')
            .map_or(rest.len(), |(i, _)| i);
        let unit = &rest[..unit_len];
        rest = &rest[unit_len..];
        let nanos_per_unit: u128 = match unit {
            "" => return Err(ParseError::MissingUnit(text.to_owned())),
            "ns" => 1,
            "us" | "µs" | "μs" => 1_000,
            "ms" => 1_000_000,
            "s" => 1_000_000_000,
            "m" => 60 * 1_000_000_000,
            "h" => 3_600 * 1_000_000_000,
            _ => {
                return Err(ParseError::UnknownUnit {
                    unit: unit.to_owned(),
                    text: text.to_owned(),
                });
            }
        };
        let overflow = || ParseError::Overflow(text.to_owned());
        let int_value: u128 = if int_part.is_empty() {
            0
        } else {
            int_part.parse().map_err(|_| overflow())?
        };
        let mut value = int_value.checked_mul(nanos_per_unit).ok_or_else(overflow)?;
        // The fraction, to nanosecond precision (extra digits are dropped, as Go does).
        let mut scale = nanos_per_unit;
        for digit in frac_part.bytes() {
            scale /= 10;
            if scale == 0 {
                break;
            }
            value += u128::from(digit - b'0') * scale;
        }
        total = total.checked_add(value).ok_or_else(overflow)?;
    }
    let secs =
        u64::try_from(total / 1_000_000_000).map_err(|_| ParseError::Overflow(text.into()))?;
    // The remainder of a division by 1e9 always fits in u32.
    let nanos = (total % 1_000_000_000) as u32;
    Ok(Duration::new(secs, nanos))
}

/// Formats a duration as Go's `time.Duration.String` does: `0s`, `500ms`, `1.5s`, `1m30s`,
/// `2h0m0s`.
pub fn format(duration: Duration) -> String {
    let nanos = duration.as_nanos();
    if nanos == 0 {
        return "0s".to_owned();
    }
    if nanos < 1_000_000_000 {
        let (unit, per) = if nanos < 1_000 {
            ("ns", 1)
        } else if nanos < 1_000_000 {
            ("µs", 1_000)
        } else {
            ("ms", 1_000_000)
        };
        return format!("{}{unit}", fraction(nanos, per));
    }
    let hours = nanos / 3_600_000_000_000;
    let minutes = (nanos / 60_000_000_000) % 60;
    let second_nanos = nanos % 60_000_000_000;
    let seconds = fraction(second_nanos, 1_000_000_000);
    if hours > 0 {
        format!("{hours}h{minutes}m{seconds}s")
    } else if minutes > 0 {
        format!("{minutes}m{seconds}s")
    } else {
        format!("{seconds}s")
    }
}

/// `value / per` with the fraction's trailing zeros dropped.
fn fraction(value: u128, per: u128) -> String {
    let whole = value / per;
    let rest = value % per;
    if rest == 0 {
        return whole.to_string();
    }
    let width = per.ilog10() as usize;
    let digits = format!("{rest:0width$}");
    format!("{whole}.{}", digits.trim_end_matches('0'))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_go_durations() {
        let cases = [
            ("0", Duration::ZERO),
            ("0s", Duration::ZERO),
            ("500ms", Duration::from_millis(500)),
            ("1.5s", Duration::from_millis(1500)),
            ("1m30s", Duration::from_secs(90)),
            ("1h2m", Duration::from_secs(3720)),
            ("2h", Duration::from_secs(7200)),
            ("10us", Duration::from_micros(10)),
            ("10µs", Duration::from_micros(10)),
            ("7ns", Duration::from_nanos(7)),
            (".5s", Duration::from_millis(500)),
            ("+3s", Duration::from_secs(3)),
            ("1.0000000001s", Duration::from_secs(1)),
        ];
        for (text, expected) in cases {
            assert_eq!(parse(text), Ok(expected), "{text}");
        }
    }

    #[test]
    fn refuses_bad_durations() {
        assert_eq!(parse(""), Err(ParseError::Empty));
        assert_eq!(parse("5"), Err(ParseError::MissingUnit("5".into())));
        assert_eq!(parse("-1s"), Err(ParseError::Negative("-1s".into())));
        assert!(matches!(parse("3d"), Err(ParseError::UnknownUnit { .. })));
        assert!(matches!(parse("s"), Err(ParseError::Invalid(_))));
        assert!(matches!(parse(".s"), Err(ParseError::Invalid(_))));
        assert!(matches!(
            parse("99999999999999999999h"),
            Err(ParseError::Overflow(_))
        ));
    }

    #[test]
    fn formats_like_go() {
        assert_eq!(format(Duration::ZERO), "0s");
        assert_eq!(format(Duration::from_millis(500)), "500ms");
        assert_eq!(format(Duration::from_millis(1500)), "1.5s");
        assert_eq!(format(Duration::from_secs(90)), "1m30s");
        assert_eq!(format(Duration::from_secs(7200)), "2h0m0s");
        assert_eq!(format(Duration::from_micros(1)), "1µs");
        assert_eq!(format(Duration::from_nanos(1_500)), "1.5µs");
    }

    proptest::proptest! {
        #[test]
        fn format_then_parse_round_trips(nanos in 0u64..1_000_000_000_000_000) {
            let duration = Duration::from_nanos(nanos);
            proptest::prop_assert_eq!(parse(&format(duration)), Ok(duration));
        }
    }
}
