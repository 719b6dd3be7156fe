//! sbatch's `--mail-type`/`--mail-user`: when flexd.toml names a `sendmail` program, a mail
//! for each event a job asked for, handed to `sendmail -t` (the recipient comes from the
//! message's `To:` header) on a thread of its own, so that a slow mailer never holds up flexd.
//! Events: BEGIN (it started), END (it ended), FAIL (it failed, timed out or lost its node),
//! REQUEUE (it was put back in the queue), TIME_LIMIT (it reached its time limit) and
//! TIME_LIMIT_50/80/90 (that share of its limit has elapsed).

use crate::state::{Effect, Job};
use crate::store::writer::Op;
use flex_proto::{JobState, MailEvents};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

/// One mail to send.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Message {
    pub to: String,
    pub subject: String,
}

impl Message {
    /// The text `sendmail -t` reads: headers, a blank line, a body. Every value is made one
    /// line of printable text, so that no job name or address adds a header.
    pub(crate) fn text(&self) -> String {
        format!(
            "To: {}\nSubject: {}\n\n{}\n",
            one_line(&self.to),
            one_line(&self.subject),
            one_line(&self.subject)
        )
    }
}

fn one_line(s: &str) -> String {
    s.chars()
        .map(|c| if c.is_control() { ' ' } else { c })
        .collect()
}

/// The mail an effect calls for, if its job asked for one: `job` finds a job in the state.
pub(crate) fn for_effect<'a>(
    e: &Effect,
    job: impl Fn(gres_plugin::JobId) -> Option<&'a Job>,
) -> Option<Message> {
    let (id, flag, what) = match e {
        Effect::Start(Op::Start { job, .. }, _) => (*job, MailEvents::BEGIN, "Began".to_string()),
        Effect::Launch(l) => (l.job, MailEvents::BEGIN, "Began".to_string()),
        Effect::Write(Op::Requeue { job, .. }) => {
            (*job, MailEvents::REQUEUE, "Requeued".to_string())
        }
        Effect::End(Op::End(end)) => {
            let j = job(end.job)?;
            let events = j.row.q.mail.as_ref()?.events;
            let failed = matches!(
                end.to,
                JobState::Failed | JobState::Timeout | JobState::NodeFail | JobState::OutOfMemory
            );
            let flag = if end.to == JobState::Timeout && events.has(MailEvents::TIME_LIMIT) {
                MailEvents::TIME_LIMIT
            } else if failed && events.has(MailEvents::FAIL) {
                MailEvents::FAIL
            } else {
                MailEvents::END
            };
            let ran = j.row.start_time.map_or(0, |s| end.time.saturating_sub(s));
            let what = format!(
                "{}, Run time {}, {}, ExitCode {}",
                match (flag, failed) {
                    (MailEvents::TIME_LIMIT, _) => "Reached time limit",
                    (_, true) => "Failed",
                    _ => "Ended",
                },
                elapsed(ran),
                end.to.name(),
                end.exit_code.unwrap_or(0)
            );
            (end.job, flag, what)
        }
        _ => return None,
    };
    message(job(id)?, flag, &what)
}

/// The mail of `flag` for `j`, if it asked for that event.
pub(crate) fn message(j: &Job, flag: u8, what: &str) -> Option<Message> {
    let mail = j.row.q.mail.as_ref()?;
    if !mail.events.has(flag) {
        return None;
    }
    let id = match j.row.q.array {
        Some(a) => a.to_string(),
        None => j.row.id.to_string(),
    };
    Some(Message {
        to: mail.user.clone().unwrap_or_else(|| j.row.user.to_string()),
        subject: format!("Flex Job_id={id} Name={} {what}", j.row.name),
    })
}

/// The TIME_LIMIT_90, _80 and _50 mails now due for running jobs, marked as sent: the first
/// due share of the limit only, as Slurm sends them.
pub(crate) fn time_limit_mails(st: &mut crate::state::State, now: u64) -> Vec<Message> {
    const SHARES: [(u8, u64); 3] = [
        (MailEvents::TIME_LIMIT_90, 90),
        (MailEvents::TIME_LIMIT_80, 80),
        (MailEvents::TIME_LIMIT_50, 50),
    ];
    let any = MailEvents::TIME_LIMIT_90 | MailEvents::TIME_LIMIT_80 | MailEvents::TIME_LIMIT_50;
    let mut out = Vec::new();
    for j in st.running_jobs_mut() {
        let Some(events) = j.row.q.mail.as_ref().map(|m| m.events) else {
            continue;
        };
        if events.0 & any == 0 {
            continue;
        }
        let limit = j.row.request.time_limit_s.max(1);
        let ran = j.row.start_time.map_or(0, |s| now.saturating_sub(s));
        let due = SHARES
            .into_iter()
            .find(|&(flag, pct)| events.has(flag) && ran * 100 >= limit * pct);
        if let Some((flag, pct)) = due {
            if j.row.q.mails_sent & flag == 0 {
                // The lower shares are past too: none of them is sent after this one.
                j.row.q.mails_sent |= SHARES
                    .iter()
                    .filter(|s| s.1 <= pct)
                    .fold(0, |acc, s| acc | s.0);
                out.extend(message(
                    j,
                    flag,
                    &format!("Reached {pct}% of its time limit"),
                ));
            }
        }
    }
    out
}

/// `H:MM:SS`, or `D-HH:MM:SS` past a day, as Slurm's mails write run times.
fn elapsed(s: u64) -> String {
    let (d, h, m, s) = (s / 86400, s / 3600 % 24, s / 60 % 60, s % 60);
    if d > 0 {
        format!("{d}-{h:02}:{m:02}:{s:02}")
    } else {
        format!("{h:02}:{m:02}:{s:02}")
    }
}

/// Hand `m` to `sendmail -t` on a thread of its own; a failure is logged, never fatal.
pub(crate) fn send(sendmail: &Path, m: Message) {
    let program: PathBuf = sendmail.to_path_buf();
    let spawned = std::thread::Builder::new()
        .name("flexd-mail".into())
        .spawn(move || {
            if let Err(e) = deliver(&program, &m) {
                tracing::warn!("mail to {} ({}): {e}", m.to, program.display());
            }
        });
    if let Err(e) = spawned {
        tracing::warn!("cannot start a thread to send mail: {e}");
    }
}

fn deliver(program: &Path, m: &Message) -> Result<(), String> {
    let mut child = Command::new(program)
        .arg("-t")
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .map_err(|e| format!("cannot run it: {e}"))?;
    let mut stdin = child.stdin.take().expect("piped stdin");
    stdin
        .write_all(m.text().as_bytes())
        .map_err(|e| format!("cannot write the message: {e}"))?;
    drop(stdin);
    let status = child
        .wait()
        .map_err(|e| format!("cannot wait for it: {e}"))?;
    if !status.success() {
        return Err(format!("it exited with {status}"));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn headers_stay_headers() {
        let m = Message {
            to: "ana@example.org\nBcc: eve@example.org".into(),
            subject: "Flex Job_id=3 Name=x\r\nBcc: eve Began".into(),
        };
        let text = m.text();
        let headers: Vec<&str> = text.split("\n\n").next().unwrap().lines().collect();
        assert_eq!(headers.len(), 2, "{text}");
        assert!(headers[0].starts_with("To: ana@example.org Bcc"), "{text}");
        assert_eq!(elapsed(3725), "01:02:05");
        assert_eq!(elapsed(90_061), "1-01:01:01");
    }
}
