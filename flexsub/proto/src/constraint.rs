//! sbatch's `--constraint`: features the host must have, combined with `&` (and), `|` (or) and
//! parentheses (`[a|b]`, Slurm's "matching or", means the same on one host). Features are
//! compared case-insensitively; flexd names a host's features (its GPU model's words, its GPU
//! memory as `80gb`, its MIG profiles) and checks the expression against them.

use std::fmt;

/// A parsed constraint expression.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Constraint {
    Feature(String),
    And(Vec<Constraint>),
    Or(Vec<Constraint>),
}

impl Constraint {
    /// Parse `a100&80gb`, `h100|a100`, `(a100|h100)&80gb`, `[a|b]`.
    pub fn parse(v: &str) -> Result<Constraint, String> {
        let bad = |why: &str| format!("invalid constraint {v:?}: {why}");
        let mut p = Parser {
            text: v.as_bytes(),
            at: 0,
        };
        let c = p.or().map_err(|e| bad(&e))?;
        p.skip_space();
        if p.at < p.text.len() {
            return Err(bad(&format!("unexpected {:?}", p.text[p.at] as char)));
        }
        Ok(c)
    }

    /// Whether a host with these features satisfies it (`has` is asked in lowercase).
    pub fn holds(&self, has: &impl Fn(&str) -> bool) -> bool {
        match self {
            Constraint::Feature(f) => has(&f.to_ascii_lowercase()),
            Constraint::And(cs) => cs.iter().all(|c| c.holds(has)),
            Constraint::Or(cs) => cs.iter().any(|c| c.holds(has)),
        }
    }
}

impl fmt::Display for Constraint {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let join = |f: &mut fmt::Formatter<'_>, cs: &[Constraint], sep: &str| {
            for (i, c) in cs.iter().enumerate() {
                if i > 0 {
                    f.write_str(sep)?;
                }
                match c {
                    Constraint::Or(_) if sep == "&" => write!(f, "({c})")?,
                    _ => write!(f, "{c}")?,
                }
            }
            Ok(())
        };
        match self {
            Constraint::Feature(s) => f.write_str(s),
            Constraint::And(cs) => join(f, cs, "&"),
            Constraint::Or(cs) => join(f, cs, "|"),
        }
    }
}

struct Parser<'a> {
    text: &'a [u8],
    at: usize,
}

impl Parser<'_> {
    fn skip_space(&mut self) {
        while self.text.get(self.at).is_some_and(u8::is_ascii_whitespace) {
            self.at += 1;
        }
    }

    fn eat(&mut self, c: u8) -> bool {
        self.skip_space();
        let hit = self.text.get(self.at) == Some(&c);
        self.at += usize::from(hit);
        hit
    }

    fn or(&mut self) -> Result<Constraint, String> {
        let mut terms = vec![self.and()?];
        while self.eat(b'|') {
            terms.push(self.and()?);
        }
        Ok(one_or(terms, Constraint::Or))
    }

    fn and(&mut self) -> Result<Constraint, String> {
        let mut terms = vec![self.factor()?];
        while self.eat(b'&') || self.eat(b',') {
            terms.push(self.factor()?);
        }
        Ok(one_or(terms, Constraint::And))
    }

    fn factor(&mut self) -> Result<Constraint, String> {
        for (open, close) in [(b'(', b')'), (b'[', b']')] {
            if self.eat(open) {
                let c = self.or()?;
                if !self.eat(close) {
                    return Err(format!("expected {:?}", close as char));
                }
                return Ok(c);
            }
        }
        self.skip_space();
        let start = self.at;
        while self
            .text
            .get(self.at)
            .is_some_and(|&b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b'-' | b'+'))
        {
            self.at += 1;
        }
        match self.text.get(self.at) {
            Some(b'*') => Err("feature counts (name*N) are for several nodes".into()),
            _ if self.at == start => Err("expected a feature name".into()),
            _ => Ok(Constraint::Feature(
                String::from_utf8_lossy(&self.text[start..self.at]).into_owned(),
            )),
        }
    }
}

fn one_or(mut terms: Vec<Constraint>, many: fn(Vec<Constraint>) -> Constraint) -> Constraint {
    if terms.len() == 1 {
        terms.pop().expect("one term")
    } else {
        many(terms)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn expressions_parse_print_and_hold() {
        let has = |f: &str| ["a100", "40gb", "1g.5gb"].contains(&f);
        for (text, shown, holds) in [
            ("a100", "a100", true),
            ("A100&40gb", "A100&40gb", true),
            ("h100|a100", "h100|a100", true),
            ("(h100|a100)&80gb", "(h100|a100)&80gb", false),
            ("[h100|a100] & 1g.5gb", "(h100|a100)&1g.5gb", true),
            ("h100", "h100", false),
        ] {
            let c = Constraint::parse(text).unwrap();
            assert_eq!(c.to_string(), shown);
            assert_eq!(c.holds(&has), holds, "{text}");
            assert_eq!(Constraint::parse(shown).unwrap().holds(&has), holds);
        }
        for bad in ["", "a&", "(a|b", "a100*2", "a b", "|a", "a$b"] {
            assert!(Constraint::parse(bad).is_err(), "{bad}");
        }
    }
}
