//! flexq's table rows: the compact [`QueueRow`] (a JSON array per job on the wire), pages of
//! them ([`QueueRows`]) read row by row with strings borrowed from the frame, and the short
//! text of what a job holds or asks for.

mod compact;

use crate::job::JobState;
use gres_plugin::{JobId, Request as ResourceRequest};
use serde::{Deserialize, Serialize};
use std::borrow::Cow;
use std::fmt::{self, Write as _};

/// One line of flexq's table: what it shows and nothing more. On the wire a JSON array of the
/// fields in this order. Strings borrow from the text they are read from where they can.
#[derive(Clone, Debug, PartialEq)]
pub struct QueueRow<'a> {
    pub id: JobId,
    pub name: Cow<'a, str>,
    pub user: Cow<'a, str>,
    pub state: JobState,
    /// Seconds it has run (so far, or in all).
    pub elapsed_s: u64,
    pub time_limit_s: u64,
    /// What it holds (running) or asks for (pending), as [`units_text`] writes it.
    pub units: Cow<'a, str>,
    /// When it started, or for a pending job when it is expected to (seconds since the epoch).
    pub start: Option<u64>,
    /// Where it runs or ran.
    pub host: Option<Cow<'a, str>>,
    /// Why it waits, or why it ended.
    pub reason: Option<Cow<'a, str>>,
    /// For array tasks, what follows `id_` (`3`, or `[4-15%2]` for pending tasks shown as one
    /// row; `id` is then the array's job id). An 11th element on the wire, sent only to
    /// clients that ask for it (`QueueFilter::arrays`), so that older clients read 10.
    pub array: Option<Cow<'a, str>>,
}

impl QueueRow<'_> {
    /// The id as flexq prints it: `12`, `12_3`, `12_[4-15%2]`.
    pub fn id_text(&self) -> String {
        match &self.array {
            Some(a) => format!("{}_{a}", self.id),
            None => self.id.to_string(),
        }
    }
}

impl Serialize for QueueRow<'_> {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        use serde::ser::SerializeTuple;
        let mut t = s.serialize_tuple(10 + usize::from(self.array.is_some()))?;
        t.serialize_element(&self.id)?;
        t.serialize_element(&self.name)?;
        t.serialize_element(&self.user)?;
        t.serialize_element(&self.state)?;
        t.serialize_element(&self.elapsed_s)?;
        t.serialize_element(&self.time_limit_s)?;
        t.serialize_element(&self.units)?;
        t.serialize_element(&self.start)?;
        t.serialize_element(&self.host)?;
        t.serialize_element(&self.reason)?;
        if let Some(a) = &self.array {
            t.serialize_element(a)?;
        }
        t.end()
    }
}

/// A string that borrows from the input unless it had escapes to undo.
pub(crate) struct Text<'a>(pub(crate) Cow<'a, str>);

impl<'de: 'a, 'a> Deserialize<'de> for Text<'a> {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> serde::de::Visitor<'de> for V {
            type Value = Text<'de>;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("a string")
            }
            fn visit_borrowed_str<E: serde::de::Error>(self, v: &'de str) -> Result<Text<'de>, E> {
                Ok(Text(Cow::Borrowed(v)))
            }
            fn visit_str<E: serde::de::Error>(self, v: &str) -> Result<Text<'de>, E> {
                Ok(Text(Cow::Owned(v.to_owned())))
            }
        }
        d.deserialize_str(V)
    }
}

impl<'de: 'a, 'a> Deserialize<'de> for QueueRow<'a> {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        /// Ten elements, or eleven with the array suffix.
        struct V;
        impl<'de> serde::de::Visitor<'de> for V {
            type Value = QueueRow<'de>;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("a queue row of 10 or 11 elements")
            }
            fn visit_seq<A: serde::de::SeqAccess<'de>>(
                self,
                mut a: A,
            ) -> Result<Self::Value, A::Error> {
                use serde::de::Error;
                let mut n = 0;
                macro_rules! next {
                    ($a:expr) => {{
                        n += 1;
                        $a.next_element()?
                            .ok_or_else(|| A::Error::invalid_length(n - 1, &self))
                    }};
                }
                let id: JobId = next!(a)?;
                let name: Text<'de> = next!(a)?;
                let user: Text<'de> = next!(a)?;
                let state: JobState = next!(a)?;
                let elapsed_s: u64 = next!(a)?;
                let time_limit_s: u64 = next!(a)?;
                let units: Text<'de> = next!(a)?;
                let start: Option<u64> = next!(a)?;
                let host: Option<Text<'de>> = next!(a)?;
                let reason: Option<Text<'de>> = next!(a)?;
                let array: Option<Text<'de>> = a.next_element()?;
                if a.next_element::<serde::de::IgnoredAny>()?.is_some() {
                    return Err(A::Error::invalid_length(12, &self));
                }
                Ok(QueueRow {
                    id,
                    name: name.0,
                    user: user.0,
                    state,
                    elapsed_s,
                    time_limit_s,
                    units: units.0,
                    start,
                    host: host.map(|t| t.0),
                    reason: reason.map(|t| t.0),
                    array: array.map(|t| t.0),
                })
            }
        }
        d.deserialize_seq(V)
    }
}

/// flexq's rows: one JSON array of [`QueueRow`]s, kept as its text. flexd writes it straight
/// from its state and flexq reads it row by row, so that a listing of 100,000 jobs costs
/// neither side a copy of every job.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct QueueRows(Box<serde_json::value::RawValue>);

impl PartialEq for QueueRows {
    fn eq(&self, other: &Self) -> bool {
        self.0.get() == other.0.get()
    }
}

impl QueueRows {
    /// Serialize the rows as they come.
    pub fn new<'a>(rows: impl Iterator<Item = QueueRow<'a>>) -> QueueRows {
        struct Lazy<I>(std::cell::Cell<Option<I>>);
        impl<'a, I: Iterator<Item = QueueRow<'a>>> Serialize for Lazy<I> {
            fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
                s.collect_seq(self.0.take().into_iter().flatten())
            }
        }
        let raw = serde_json::value::to_raw_value(&Lazy(std::cell::Cell::new(Some(rows))))
            .expect("rows always serialize");
        QueueRows(raw)
    }

    /// Each row in turn, its strings borrowed from the answer.
    pub fn for_each<'s>(&'s self, f: impl FnMut(QueueRow<'s>)) -> Result<(), serde_json::Error> {
        let mut d = serde_json::Deserializer::from_str(self.0.get());
        serde::Deserializer::deserialize_seq(&mut d, EachRow(f))?;
        d.end()
    }

    /// The length of the rows' JSON text.
    pub fn text_len(&self) -> usize {
        self.0.get().len()
    }

    /// All rows at once.
    pub fn rows(&self) -> Result<Vec<QueueRow<'_>>, serde_json::Error> {
        let mut v = Vec::new();
        self.for_each(|r| v.push(r))?;
        Ok(v)
    }
}

/// Hands each row of an array to its function as it is read.
struct EachRow<F>(F);

impl<'de, F: FnMut(QueueRow<'de>)> serde::de::Visitor<'de> for EachRow<F> {
    type Value = ();
    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("an array of rows")
    }
    fn visit_seq<A: serde::de::SeqAccess<'de>>(mut self, mut a: A) -> Result<(), A::Error> {
        while let Some(row) = a.next_element()? {
            (self.0)(row);
        }
        Ok(())
    }
}

impl<'de, F: FnMut(QueueRow<'de>)> serde::de::DeserializeSeed<'de> for EachRow<F> {
    type Value = ();
    fn deserialize<D: serde::Deserializer<'de>>(self, d: D) -> Result<(), D::Error> {
        d.deserialize_seq(self)
    }
}

/// Read a [`Response::QueueRows`] frame body row by row, the rows' strings borrowed from it:
/// how flexq makes its table without a copy of every job. `Ok(None)`, having read no row,
/// when the body is another answer (decode it as a [`Response`]); otherwise the page's `next`.
pub fn read_queue_rows<'a>(
    body: &'a [u8],
    mut f: impl FnMut(QueueRow<'a>),
) -> Result<Option<Option<JobId>>, serde_json::Error> {
    if let Some(page) = compact::read_page(body, &mut f) {
        return page.map(Some);
    }
    /// `{"rows": [...], "next": ...}`, in any order.
    struct Page<F>(F);
    impl<'de, F: FnMut(QueueRow<'de>)> serde::de::Visitor<'de> for Page<F> {
        type Value = Option<JobId>;
        fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
            f.write_str("a page of rows")
        }
        fn visit_map<A: serde::de::MapAccess<'de>>(
            mut self,
            mut m: A,
        ) -> Result<Option<JobId>, A::Error> {
            let (mut rows, mut next) = (false, None);
            while let Some(key) = m.next_key::<Text<'de>>()? {
                match &*key.0 {
                    "rows" if !rows => {
                        m.next_value_seed(EachRow(&mut self.0))?;
                        rows = true;
                    }
                    "next" if next.is_none() => next = Some(m.next_value::<Option<JobId>>()?),
                    k => return Err(serde::de::Error::unknown_field(k, &["rows", "next"])),
                }
            }
            match (rows, next) {
                (true, Some(next)) => Ok(next),
                (false, _) => Err(serde::de::Error::missing_field("rows")),
                (true, None) => Err(serde::de::Error::missing_field("next")),
            }
        }
    }
    impl<'de, F: FnMut(QueueRow<'de>)> serde::de::DeserializeSeed<'de> for Page<F> {
        type Value = Option<JobId>;
        fn deserialize<D: serde::Deserializer<'de>>(self, d: D) -> Result<Option<JobId>, D::Error> {
            d.deserialize_map(self)
        }
    }
    /// `{"QueueRows": page}`, or any other answer.
    struct Answer<F>(F);
    impl<'de, F: FnMut(QueueRow<'de>)> serde::de::Visitor<'de> for Answer<F> {
        type Value = Option<Option<JobId>>;
        fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
            f.write_str("an answer")
        }
        fn visit_str<E: serde::de::Error>(self, _: &str) -> Result<Self::Value, E> {
            Ok(None)
        }
        fn visit_map<A: serde::de::MapAccess<'de>>(
            self,
            mut m: A,
        ) -> Result<Self::Value, A::Error> {
            let Some(variant) = m.next_key::<Text<'de>>()? else {
                return Ok(None);
            };
            if variant.0 == "QueueRows" {
                m.next_value_seed(Page(self.0)).map(Some)
            } else {
                m.next_value::<serde::de::IgnoredAny>()?;
                Ok(None)
            }
        }
    }
    let mut d = serde_json::Deserializer::from_slice(body);
    let page = serde::Deserializer::deserialize_any(&mut d, Answer(f))?;
    d.end()?;
    Ok(page)
}

/// Thousandths as a short decimal (`0.25`, `1`).
pub fn thousandths(v: u32) -> String {
    let s = format!("{:.3}", v as f64 / 1000.0);
    s.trim_end_matches('0').trim_end_matches('.').to_string()
}

/// What a job holds, from its units' shares in thousandths (`2` leaves, `0.5gpu`), or, when it
/// holds nothing, what it asks for (`4`, `gpu=0.5`, `gpumem=16G`, joined by commas; `0` for a CPU-only job, `all` for `--exclusive`).
pub fn units_text(held: &[u32], asked: &ResourceRequest) -> String {
    if !held.is_empty() {
        return if held.iter().all(|&s| s >= 1000) {
            held.len().to_string()
        } else {
            format!("{}gpu", thousandths(held.iter().sum()))
        };
    }
    if asked.exclusive {
        return "all".into();
    }
    if !asked.wants_gpu() {
        return "0".into();
    }
    let mut s = String::new();
    let sep = |s: &mut String| {
        if !s.is_empty() {
            s.push(',');
        }
    };
    if let Some(n) = asked.leaves {
        crate::text::push_u64(&mut s, n.into());
    }
    if let Some(f) = asked.gpus {
        sep(&mut s);
        let _ = write!(s, "gpu={f}");
    }
    if let Some(m) = asked.mem_bytes {
        sep(&mut s);
        s.push_str("gpumem=");
        s.push_str(&crate::text::format_size(m));
    }
    s
}
