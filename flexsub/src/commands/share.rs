//! flexshare: users' and accounts' shares, decayed usage and fair-share factors (like sshare).

use crate::client::{into_error, Client};
use crate::error::{exit, Error};
use crate::format::cut;
use clap::Parser;
use flex_proto::{Request, Response, ShareQuery, ShareRow};
use std::fmt::Write as _;
use std::io::Write;

/// Show the fair share of accounts and users (like sshare): shares (raw and normalized),
/// decayed usage in slice-hours (a 1g leaf for an hour is 1, flexreport's unit), the share of
/// all usage, and the fair-share factor that weighs into priority.
#[derive(Debug, Parser)]
#[command(name = "flexshare", version, disable_help_flag = true)]
pub struct Args {
    /// Only these users (comma-separated names); without, every account and user.
    #[arg(
        short = 'u',
        long = "users",
        value_delimiter = ',',
        value_name = "USERS"
    )]
    pub users: Vec<String>,
    /// Print JSON.
    #[arg(long)]
    pub json: bool,
    /// Leave out the header line.
    #[arg(short = 'h', long = "noheader")]
    pub noheader: bool,
    /// sshare's fields, comma-separated, each with an optional `%WIDTH`: Account, User,
    /// RawShares, NormShares, RawUsage, EffectvUsage, FairShare (e.g. `Account%256`).
    #[arg(short = 'o', long = "format", value_name = "FIELDS")]
    pub format: Option<String>,
    /// Only users' rows, each with its account (yours unless -u names others).
    #[arg(short = 'U', long = "Users")]
    pub users_only: bool,
    /// `|` between fields (sshare's -P), and after the last too with -p.
    #[arg(short = 'P', long = "parsable2")]
    pub parsable2: bool,
    #[arg(short = 'p', long = "parsable")]
    pub parsable: bool,
    /// Accepted for sshare's scripts: every user is shown already (`-a/--all`), the long
    /// listing adds nothing (`-l/--long`), this host's cluster (`-M`).
    #[arg(short = 'a', long = "all", hide = true)]
    pub all: bool,
    #[arg(short = 'l', long = "long", hide = true)]
    pub long: bool,
    #[arg(short = 'M', long = "clusters", hide = true)]
    pub clusters: Option<String>,
    /// Print help.
    #[arg(long, action = clap::ArgAction::Help)]
    pub help: Option<bool>,
}

/// Run flexshare; returns the exit code.
pub fn run(a: &Args, out: &mut impl Write) -> Result<i32, Error> {
    crate::options::check_clusters(a.clusters.as_deref().unwrap_or_default())
        .map_err(Error::Input)?;
    let _ = (a.all, a.long);
    let format = a.format.as_deref().map(Columns::parse).transpose()?;
    let mut users = a.users.clone();
    if a.users_only && users.is_empty() {
        // sshare -U: the caller's own associations.
        users.push(crate::slurm_names::user_name(nix::unistd::getuid()));
    }
    let rows = match Client::connect("flexshare")?.call(&Request::Shares(ShareQuery { users }))? {
        Response::Shares(r) => r,
        other => return Err(into_error(other)),
    };
    let mut rows: Vec<ShareRow> = rows
        .into_iter()
        .filter(|r| !a.users_only || r.user.is_some())
        .collect();
    let sep = (a.parsable || a.parsable2).then_some(if a.parsable { "|" } else { "" });
    let text = if a.json {
        serde_json::to_string_pretty(&rows).expect("protocol types serialize") + "\n"
    } else if format.is_some() || a.users_only || sep.is_some() {
        // A user's row is charged to its account: the one its jobs get by default.
        for r in rows.iter_mut().filter(|r| r.account.is_empty()) {
            if let Some(u) = &r.user {
                r.account = crate::slurm_names::default_account(u);
            }
        }
        let cols = format.unwrap_or_else(Columns::default_sshare);
        cols.text(&rows, !a.noheader, sep)
    } else {
        table(&rows, !a.noheader)
    };
    out.write_all(text.as_bytes()).map_err(Error::output)?;
    Ok(exit::OK)
}

/// sshare's columns.
pub fn table(rows: &[ShareRow], header: bool) -> String {
    let mut s = String::new();
    if header {
        s.push_str("             Account       User  RawShares  NormShares    RawUsage  EffectvUsage  FairShare\n");
    }
    for r in rows {
        let _ = writeln!(
            s,
            "{:>20} {:>10} {:>10} {:>11.6} {:>11.2} {:>13.6} {:>10.6}",
            cut(&r.account, 20),
            cut(r.user.as_deref().unwrap_or(""), 10),
            r.raw_shares,
            r.norm_shares,
            r.raw_usage,
            r.effective_usage,
            r.fairshare
        );
    }
    s
}

/// sshare's `--format` columns: each field and its width.
pub struct Columns(Vec<(usize, usize)>);

/// sshare's fields: name, default width.
const FIELDS: [(&str, usize); 7] = [
    ("Account", 20),
    ("User", 10),
    ("RawShares", 10),
    ("NormShares", 11),
    ("RawUsage", 11),
    ("EffectvUsage", 13),
    ("FairShare", 10),
];

impl Columns {
    fn default_sshare() -> Columns {
        Columns((0..FIELDS.len()).map(|i| (i, FIELDS[i].1)).collect())
    }

    /// `Account%256,User`: names case-insensitively, `%N` a width.
    fn parse(fmt: &str) -> Result<Columns, Error> {
        let mut out = Vec::new();
        for item in fmt.split(',').filter(|s| !s.is_empty()) {
            let (name, width) = item.split_once('%').unwrap_or((item, ""));
            let Some(i) = FIELDS
                .iter()
                .position(|f| f.0.eq_ignore_ascii_case(name.trim()))
            else {
                let names: Vec<&str> = FIELDS.iter().map(|f| f.0).collect();
                return Err(Error::Input(format!(
                    "invalid field {name:?} in --format: sshare's fields here are {}",
                    names.join(", ")
                )));
            };
            let width = match width {
                "" => FIELDS[i].1,
                w => w.parse().map_err(|_| {
                    Error::Input(format!("invalid width {w:?} of {name} in --format"))
                })?,
            };
            out.push((i, width));
        }
        Ok(Columns(out))
    }

    /// The rows: right-justified in their widths, a blank between (sshare's layout), or
    /// between `|` with `sep` (`|` after the last too when `sep` is `|`).
    fn text(&self, rows: &[ShareRow], header: bool, sep: Option<&str>) -> String {
        let line = |cells: Vec<String>| -> String {
            let mut l = match sep {
                Some(end) => cells.join("|") + end,
                None => {
                    let padded: Vec<String> = cells
                        .iter()
                        .zip(&self.0)
                        .map(|(c, (_, w))| format!("{:>w$}", cut(c, *w)))
                        .collect();
                    padded.join(" ")
                }
            };
            l.push('\n');
            l
        };
        let mut s = String::new();
        if header {
            s.push_str(&line(
                self.0
                    .iter()
                    .map(|(i, _)| FIELDS[*i].0.to_string())
                    .collect(),
            ));
            if sep.is_none() {
                let dashes: Vec<String> = self.0.iter().map(|(_, w)| "-".repeat(*w)).collect();
                s.push_str(&dashes.join(" "));
                s.push('\n');
            }
        }
        for r in rows {
            s.push_str(&line(
                self.0
                    .iter()
                    .map(|(i, _)| match i {
                        0 => r.account.clone(),
                        1 => r.user.clone().unwrap_or_default(),
                        2 => r.raw_shares.to_string(),
                        3 => format!("{:.6}", r.norm_shares),
                        4 => format!("{:.2}", r.raw_usage),
                        5 => format!("{:.6}", r.effective_usage),
                        _ => format!("{:.6}", r.fairshare),
                    })
                    .collect(),
            ));
        }
        s
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn arguments_parse() {
        use clap::CommandFactory;
        Args::command().debug_assert();
    }

    #[test]
    fn accounts_and_users_line_up_under_the_header() {
        let rows = [
            ShareRow {
                account: "physics".into(),
                user: None,
                raw_shares: 3,
                norm_shares: 0.75,
                raw_usage: 12.5,
                effective_usage: 0.5,
                fairshare: 0.63,
            },
            ShareRow {
                account: String::new(),
                user: Some("alice".into()),
                raw_shares: 1,
                norm_shares: 0.5,
                raw_usage: 12.5,
                effective_usage: 1.0,
                fairshare: 0.25,
            },
        ];
        let t = table(&rows, true);
        let lines: Vec<&str> = t.lines().collect();
        assert_eq!(lines.len(), 3);
        assert!(lines.iter().all(|l| l.len() == lines[0].len()), "{t}");
        assert!(lines[1].contains("physics") && lines[1].contains("12.50"));
        assert!(lines[2].contains("alice") && lines[2].contains("0.250000"));
        let cols = Columns::parse("account%12,User").unwrap();
        assert_eq!(
            cols.text(&rows, true, None),
            "     Account       User\n------------ ----------\n     physics           \n                  alice\n"
        );
        assert_eq!(
            cols.text(&rows[1..], false, Some("|")),
            "|alice|\n",
            "-p ends each line with |"
        );
        assert!(Columns::parse("Account%x").is_err());
        assert!(Columns::parse("Colour").is_err());
    }
}
