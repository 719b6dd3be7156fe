//! Numbers and sizes as the tables print them, shared by flexd's rows and the commands.

/// A number in decimal onto the end of `out`, without the formatting machinery.
pub fn push_u64(out: &mut String, mut n: u64) {
    let mut digits = [0u8; 20];
    let mut i = digits.len();
    loop {
        i -= 1;
        digits[i] = b'0' + (n % 10) as u8;
        n /= 10;
        if n == 0 {
            break;
        }
    }
    out.push_str(std::str::from_utf8(&digits[i..]).expect("ASCII digits"));
}

/// Format bytes compactly with binary units (`16G`, `1.5G`, `512M`).
pub fn format_size(bytes: u64) -> String {
    const UNITS: [(&str, u64); 4] = [
        ("T", 1 << 40),
        ("G", 1 << 30),
        ("M", 1 << 20),
        ("K", 1 << 10),
    ];
    for (u, m) in UNITS {
        if bytes >= m {
            let v = bytes as f64 / m as f64;
            return if (v - v.round()).abs() < 0.005 {
                format!("{}{u}", v.round())
            } else {
                format!("{v:.2}{u}")
            };
        }
    }
    format!("{bytes}B")
}

/// `s` safe to print on a terminal: control characters (newlines, escapes, C1 controls) and
/// the bidirectional overrides that reorder a line are written as `\n`, `\x1b`, `\u{202e}`,
/// so that a job name cannot forge a line of a table or drive the terminal. Borrowed when
/// there is nothing to escape.
pub fn escape_controls(s: &str) -> std::borrow::Cow<'_, str> {
    fn unsafe_char(c: char) -> bool {
        c.is_control() || matches!(c, '\u{202a}'..='\u{202e}' | '\u{2066}'..='\u{2069}')
    }
    // Printable ASCII, the usual case, checked a word at a time before any char is decoded.
    if s.bytes().all(|b| (0x20..0x7f).contains(&b)) || !s.chars().any(unsafe_char) {
        return std::borrow::Cow::Borrowed(s);
    }
    let mut out = String::with_capacity(s.len() + 8);
    for c in s.chars() {
        match c {
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            c if unsafe_char(c) && (c as u32) < 0x100 => {
                out.push_str(&format!("\\x{:02x}", c as u32));
            }
            c if unsafe_char(c) => out.push_str(&format!("\\u{{{:x}}}", c as u32)),
            c => out.push(c),
        }
    }
    std::borrow::Cow::Owned(out)
}

#[cfg(test)]
mod tests {
    use super::escape_controls;

    #[test]
    fn control_characters_are_escaped_and_the_rest_kept() {
        assert_eq!(escape_controls("plain name é"), "plain name é");
        assert_eq!(
            escape_controls("a\n 9 root\x1b[2J\u{9b}\u{202e}"),
            "a\\n 9 root\\x1b[2J\\x9b\\u{202e}"
        );
    }
}
