//! The JSON Canonicalization Scheme (RFC 8785): one byte sequence per JSON value, so a
//! signature over it survives re-serialisation by any conforming implementation.
//!
//! Object members are sorted by the UTF-16 code units of their names, numbers are written as
//! ECMAScript's `Number.prototype.toString` writes doubles, strings escape only what JSON
//! requires, and there is no whitespace.

use std::fmt::Write;

use serde_json::Value;

/// Why a value has no canonical form.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum JcsError {
    /// Nesting deeper than `MAX_DEPTH`.
    #[error("nesting deeper than {MAX_DEPTH} levels")]
    TooDeep,
    /// A number JSON cannot carry (NaN or infinite).
    #[error("a number that is not finite")]
    NotFinite,
}

/// Most levels of arrays and objects canonicalised.
pub const MAX_DEPTH: usize = 128;

/// The canonical form of `value`.
pub fn canonicalize(value: &Value) -> Result<String, JcsError> {
    let mut out = String::new();
    write_value(&mut out, value, 1)?;
    Ok(out)
}

fn write_value(out: &mut String, value: &Value, depth: usize) -> Result<(), JcsError> {
    match value {
        Value::Null => out.push_str("null"),
        Value::Bool(true) => out.push_str("true"),
        Value::Bool(false) => out.push_str("false"),
        Value::Number(number) => {
            let double = number.as_f64().ok_or(JcsError::NotFinite)?;
            write_number(out, double)?;
        }
        Value::String(text) => write_string(out, text),
        Value::Array(items) => {
            if depth > MAX_DEPTH {
                return Err(JcsError::TooDeep);
            }
            out.push('[');
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                write_value(out, item, depth + 1)?;
            }
            out.push(']');
        }
        Value::Object(members) => {
            if depth > MAX_DEPTH {
                return Err(JcsError::TooDeep);
            }
            let mut sorted: Vec<(&String, &Value)> = members.iter().collect();
            sorted.sort_by(|a, b| a.0.encode_utf16().cmp(b.0.encode_utf16()));
            out.push('{');
            for (i, (name, member)) in sorted.into_iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                write_string(out, name);
                out.push(':');
                write_value(out, member, depth + 1)?;
            }
            out.push('}');
        }
    }
    Ok(())
}

fn write_string(out: &mut String, text: &str) {
    out.push('"');
    for c in text.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\u{8}' => out.push_str("\\b"),
            '\u{c}' => out.push_str("\\f"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            c if (c as u32) < 0x20 => {
                let _ = write!(out, "\\u{:04x}", c as u32);
            }
            c => out.push(c),
        }
    }
    out.push('"');
}

/// A double as ECMAScript writes it: the shortest digits that read back to the same double,
/// plainly between 1e-7 and 1e21, with an exponent outside.
fn write_number(out: &mut String, value: f64) -> Result<(), JcsError> {
    if !value.is_finite() {
        return Err(JcsError::NotFinite);
    }
    if value == 0.0 {
        out.push('0');
        return Ok(());
    }
    if value < 0.0 {
        out.push('-');
    }
    // `{:e}` writes the shortest digits that read back to the value, as `d.ddde±x`. When two
    // such strings of that length exist, ECMAScript takes the one closer to the value (the even
    // one on a tie), which is what exact formatting to that many digits writes.
    let shortest = format!("{:e}", value.abs());
    let length = shortest.split_once('e').map_or(1, |(mantissa, _)| {
        mantissa.chars().filter(char::is_ascii_digit).count()
    });
    let scientific = format!("{:.*e}", length.saturating_sub(1), value.abs());
    let (mantissa, exponent) = scientific
        .split_once('e')
        .expect("`{:e}` always writes an exponent");
    let digits: String = mantissa.chars().filter(char::is_ascii_digit).collect();
    let digits = digits.trim_end_matches('0');
    let digits = if digits.is_empty() { "0" } else { digits };
    let exponent: i32 = exponent.parse().expect("`{:e}` writes an integer exponent");
    // The value is 0.DIGITS × 10^n.
    let k = digits.len() as i32;
    let n = exponent + 1;
    if k <= n && n <= 21 {
        out.push_str(digits);
        out.extend(std::iter::repeat_n('0', (n - k) as usize));
    } else if 0 < n && n <= 21 {
        let (whole, fraction) = digits.split_at(n as usize);
        out.push_str(whole);
        out.push('.');
        out.push_str(fraction);
    } else if -6 < n && n <= 0 {
        out.push_str("0.");
        out.extend(std::iter::repeat_n('0', (-n) as usize));
        out.push_str(digits);
    } else {
        let (first, rest) = digits.split_at(1);
        out.push_str(first);
        if !rest.is_empty() {
            out.push('.');
            out.push_str(rest);
        }
        let sign = if n > 0 { '+' } else { '-' };
        let _ = write!(out, "e{sign}{}", (n - 1).abs());
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn number(value: f64) -> String {
        let mut out = String::new();
        write_number(&mut out, value).expect("finite");
        out
    }

    #[test]
    fn the_rfc_example_canonicalizes_byte_for_byte() {
        // RFC 8785, section 3.2.2's example input and its canonical output.
        let input: Value = serde_json::from_str(
            r#"{
                "numbers": [333333333.33333329, 1E30, 4.50, 2e-3, 0.000000000000000000000000001],
                "string": "\u20ac$\u000F\u000aA'\u0042\u0022\u005c\\\"\/",
                "literals": [null, true, false]
            }"#,
        )
        .expect("json");
        assert_eq!(
            canonicalize(&input).expect("canonical"),
            r#"{"literals":[null,true,false],"numbers":[333333333.3333333,1e+30,4.5,0.002,1e-27],"string":"€$\u000f\nA'B\"\\\\\"/"}"#
        );
    }

    #[test]
    fn members_sort_by_utf16_code_units() {
        // RFC 8785, section 3.2.3's sorting example.
        let input: Value = serde_json::from_str(
            r#"{"\u20ac": "Euro Sign", "\r": "Carriage Return", "\ufb33": "Hebrew Letter Dalet With Dagesh",
                "1": "One", "\ud83d\ude00": "Emoji: Grinning Face", "\u0080": "Control",
                "\u00f6": "Latin Small Letter O With Diaeresis"}"#,
        )
        .expect("json");
        let canonical = canonicalize(&input).expect("canonical");
        let order: Vec<&str> = [
            "Carriage Return",
            "One",
            "Control",
            "Latin Small Letter O With Diaeresis",
            "Euro Sign",
            "Emoji: Grinning Face",
            "Hebrew Letter Dalet With Dagesh",
        ]
        .into_iter()
        .collect();
        let positions: Vec<usize> = order
            .iter()
            .map(|value| canonical.find(value).expect("present"))
            .collect();
        assert!(positions.windows(2).all(|w| w[0] < w[1]), "{canonical}");
    }

    #[test]
    fn numbers_follow_ecmascript() {
        // RFC 8785, appendix B's sample values (IEEE 754 bits → canonical text).
        for (bits, text) in [
            (0x0000_0000_0000_0000u64, "0"),
            (0x8000_0000_0000_0000, "0"),
            (0x0000_0000_0000_0001, "5e-324"),
            (0x8000_0000_0000_0001, "-5e-324"),
            (0x7fef_ffff_ffff_ffff, "1.7976931348623157e+308"),
            (0xffef_ffff_ffff_ffff, "-1.7976931348623157e+308"),
            (0x4340_0000_0000_0000, "9007199254740992"),
            (0xc340_0000_0000_0000, "-9007199254740992"),
            (0x4430_0000_0000_0000, "295147905179352830000"),
            (0x44b5_2d02_c7e1_4af5, "9.999999999999997e+22"),
            (0x44b5_2d02_c7e1_4af6, "1e+23"),
            (0x44b5_2d02_c7e1_4af7, "1.0000000000000001e+23"),
            (0x444b_1ae4_d6e2_ef4e, "999999999999999700000"),
            (0x444b_1ae4_d6e2_ef4f, "999999999999999900000"),
            (0x444b_1ae4_d6e2_ef50, "1e+21"),
            (0x3eb0_c6f7_a0b5_ed8c, "9.999999999999997e-7"),
            (0x3eb0_c6f7_a0b5_ed8d, "0.000001"),
            (0x41b3_de43_5555_5553, "333333333.3333332"),
            (0x41b3_de43_5555_5554, "333333333.33333325"),
            (0x41b3_de43_5555_5555, "333333333.3333333"),
            (0x41b3_de43_5555_5556, "333333333.3333334"),
            (0x41b3_de43_5555_5557, "333333333.33333343"),
            (0xbecb_f647_612f_3696, "-0.0000033333333333333333"),
            (0x43143ff3c1cb0959, "1424953923781206.2"),
        ] {
            assert_eq!(number(f64::from_bits(bits)), text, "{bits:#x}");
        }
        assert_eq!(
            canonicalize(&json!([1, -7, 18446744073709551615u64])).expect("canonical"),
            "[1,-7,18446744073709552000]"
        );
    }

    #[test]
    fn whitespace_goes_and_nesting_is_bounded() {
        let input: Value =
            serde_json::from_str("{ \"a\" : [ 1 , { \"b\" : \"\\u001f\" } ] }").expect("json");
        assert_eq!(
            canonicalize(&input).expect("canonical"),
            r#"{"a":[1,{"b":"\u001f"}]}"#
        );
        let mut deep = json!(1);
        for _ in 0..MAX_DEPTH + 1 {
            deep = json!([deep]);
        }
        assert_eq!(canonicalize(&deep), Err(JcsError::TooDeep));
    }
}
