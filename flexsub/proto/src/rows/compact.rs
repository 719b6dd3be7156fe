//! The fast path of [`super::read_queue_rows`]: a page of rows read straight from the bytes
//! as flexd's serde_json writes them (no blanks, strings without escapes), each field parsed
//! by hand instead of through serde's visitors, which took half of flexq's time on a listing
//! of 100,000 jobs. A row it does not expect (an escaped string, a blank) is read by
//! serde_json from where it starts, so what is accepted, and what each row reads as, are
//! those of the general path.

use crate::job::JobState;
use crate::rows::QueueRow;
use gres_plugin::JobId;
use serde::de::Error as _;
use std::borrow::Cow;

/// The page's `next`, its rows handed to `f` in turn; None, having handed on no row, when
/// `body` does not begin as a page of rows does (the general path reads it then).
pub(super) fn read_page<'a>(
    body: &'a [u8],
    f: &mut impl FnMut(QueueRow<'a>),
) -> Option<Result<Option<JobId>, serde_json::Error>> {
    const HEAD: &str = r#"{"QueueRows":{"rows":["#;
    let text = std::str::from_utf8(body).ok()?;
    if !text.starts_with(HEAD) {
        return None;
    }
    let mut c = Cursor {
        text,
        at: HEAD.len(),
    };
    Some(c.page(f))
}

/// A place in the page's text.
struct Cursor<'a> {
    text: &'a str,
    at: usize,
}

impl<'a> Cursor<'a> {
    fn page(
        &mut self,
        f: &mut impl FnMut(QueueRow<'a>),
    ) -> Result<Option<JobId>, serde_json::Error> {
        let cut = || serde_json::Error::custom("a page of rows that is not one");
        self.blanks();
        if !self.eat(b']') {
            loop {
                self.blanks();
                let from = self.at;
                let row = match self.row() {
                    Some(row) => row,
                    None => {
                        self.at = from;
                        self.general()?
                    }
                };
                f(row);
                self.blanks();
                if self.eat(b']') {
                    break;
                }
                if !self.eat(b',') {
                    return Err(cut());
                }
            }
        }
        self.blanks();
        let next = self.word(r#","next":"#).then(|| self.maybe(Self::number));
        self.blanks();
        match next {
            Some(Some(next)) if self.word("}}") && self.text[self.at..].trim().is_empty() => {
                Ok(next.map(JobId))
            }
            _ => Err(cut()),
        }
    }

    /// One row by serde_json (the general path's own reading of it).
    fn general(&mut self) -> Result<QueueRow<'a>, serde_json::Error> {
        let text = &self.text[self.at..];
        let mut rows = serde_json::Deserializer::from_str(text).into_iter::<QueueRow<'a>>();
        let row = rows
            .next()
            .unwrap_or_else(|| Err(serde_json::Error::custom("a row cut short")))?;
        self.at += rows.byte_offset();
        Ok(row)
    }

    /// `[id,"name","user","STATE",elapsed,limit,"units",start,"host","reason"(,"array")]`,
    /// with null for a missing start, host or reason.
    fn row(&mut self) -> Option<QueueRow<'a>> {
        let item = |c: &mut Self| c.eat(b',').then_some(());
        self.eat(b'[').then_some(())?;
        let id = JobId(self.number()?);
        item(self)?;
        let name = self.string()?;
        item(self)?;
        let user = self.string()?;
        item(self)?;
        let state = self.string()?;
        let state = JobState::ALL.into_iter().find(|s| s.name() == state)?;
        item(self)?;
        let elapsed_s = self.number()?;
        item(self)?;
        let time_limit_s = self.number()?;
        item(self)?;
        let units = self.string()?;
        item(self)?;
        let start = self.maybe(Self::number)?;
        item(self)?;
        let host = self.maybe(Self::string)?;
        item(self)?;
        let reason = self.maybe(Self::string)?;
        // The 11th is sent only for an array task, and is never null.
        let array = match self.eat(b',') {
            true => Some(self.string()?),
            false => None,
        };
        self.eat(b']').then_some(())?;
        Some(QueueRow {
            id,
            name: Cow::Borrowed(name),
            user: Cow::Borrowed(user),
            state,
            elapsed_s,
            time_limit_s,
            units: Cow::Borrowed(units),
            start,
            host: host.map(Cow::Borrowed),
            reason: reason.map(Cow::Borrowed),
            array: array.map(Cow::Borrowed),
        })
    }

    fn eat(&mut self, b: u8) -> bool {
        let hit = self.text.as_bytes().get(self.at) == Some(&b);
        self.at += usize::from(hit);
        hit
    }

    fn word(&mut self, w: &str) -> bool {
        let hit = self.text[self.at..].starts_with(w);
        self.at += if hit { w.len() } else { 0 };
        hit
    }

    fn blanks(&mut self) {
        let rest = &self.text.as_bytes()[self.at..];
        self.at += rest.iter().take_while(|b| b.is_ascii_whitespace()).count();
    }

    /// null, or what `read` reads.
    fn maybe<T>(&mut self, read: impl FnOnce(&mut Self) -> Option<T>) -> Option<Option<T>> {
        if self.word("null") {
            return Some(None);
        }
        read(self).map(Some)
    }

    /// A number without sign, fraction or exponent that fits in a u64 (JSON's: no leading 0).
    fn number(&mut self) -> Option<u64> {
        let digits = self.text.as_bytes()[self.at..]
            .iter()
            .take_while(|b| b.is_ascii_digit())
            .count();
        let s = &self.text[self.at..self.at + digits];
        if digits == 0 || (digits > 1 && s.starts_with('0')) {
            return None;
        }
        let n = s.parse().ok()?;
        self.at += digits;
        Some(n)
    }

    /// A string with nothing escaped, borrowed from the text.
    fn string(&mut self) -> Option<&'a str> {
        let text = self.text;
        let rest = text.as_bytes().get(self.at..)?.strip_prefix(b"\"")?;
        let len = rest
            .iter()
            .position(|&b| b == b'"' || b == b'\\' || b < 0x20)?;
        if rest[len] != b'"' {
            return None;
        }
        let s = &text[self.at + 1..self.at + 1 + len];
        self.at += len + 2;
        Some(s)
    }
}
