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
