//! sacctmgr's read-only part, as the tools query it (`sacctmgr -nP show users withassoc
//! format=account,qos where user=NAME`, `sacctmgr -n -s list user NAME format=account%256`,
//! `sacctmgr show qos`): Flex's users, accounts and QOS as Slurm's associations. A Flex host
//! has no association table: a user's associations are its default account (its primary group,
//! as flexd charges a job that names none) and each account flexshare has seen it use; its QOS
//! are those flexd.toml lets it use (`show config`'s `qos NAME` lines). Changes (`add`,
//! `modify`, `delete`) are refused: flexd.toml holds them.

use super::{default_account, user_name};
use crate::client::{into_error, Client};
use crate::error::{exit, Error};
use flex_proto::{Request, Response, ShareQuery};
use gres_plugin::env::CLUSTER;
use std::ffi::OsString;
use std::io::Write;

/// One association, or one QOS: every field sacctmgr may be asked for, by its lower-case name.
type Record = Vec<(&'static str, String)>;

/// Each field: its names (lower case), its header, its default width.
const FIELDS: &[(&[&str], &str, usize)] = &[
    (&["cluster"], "Cluster", 10),
    (&["account"], "Account", 10),
    (&["user"], "User", 10),
    (&["partition"], "Partition", 10),
    (&["share", "fairshare"], "Share", 9),
    (&["priority"], "Priority", 10),
    (&["qos"], "QOS", 20),
    (&["defaultqos", "def qos"], "Def QOS", 9),
    (&["defaultaccount", "def acct"], "Def Acct", 10),
    (&["admin", "adminlevel"], "Admin", 9),
    (&["name"], "Name", 10),
    (&["descr", "description"], "Descr", 20),
    (&["org", "organization"], "Org", 20),
    (&["maxwall"], "MaxWall", 11),
    (&["maxjobs", "maxjobspu"], "MaxJobsPU", 9),
    (&["maxsubmit", "maxsubmitpu"], "MaxSubmitPU", 11),
    (&["maxtrespu"], "MaxTRESPU", 13),
    (&["flags"], "Flags", 10),
    (&["gracetime"], "GraceTime", 10),
    (&["usagefactor"], "UsageFactor", 11),
    (&["preemptmode"], "PreemptMode", 11),
];

/// What was asked: the entity, its filters and its format.
struct Ask {
    entity: Entity,
    noheader: bool,
    /// `|` after each field but the last (`-P`), or after every field (`-p`).
    parsable: Option<bool>,
    users: Vec<String>,
    accounts: Vec<String>,
    names: Vec<String>,
    format: Option<String>,
}

#[derive(Clone, Copy, PartialEq)]
enum Entity {
    Users { assoc: bool },
    Accounts { assoc: bool },
    Assocs,
    Qos,
}

/// sacctmgr: `[OPTIONS] show|list ENTITY [withassoc] [where] [KEY=VALUE...] [format=F,...]`.
pub(super) fn sacctmgr(args: Vec<OsString>) -> Result<i32, Error> {
    let words: Vec<String> = args[1..]
        .iter()
        .map(|w| w.to_string_lossy().into_owned())
        .collect();
    let ask = parse(&words)?;
    let text = answer(&ask)?;
    std::io::stdout()
        .lock()
        .write_all(text.as_bytes())
        .map_err(Error::output)?;
    Ok(exit::OK)
}

fn list(v: &str) -> Vec<String> {
    v.split(',')
        .filter(|s| !s.is_empty())
        .map(str::to_string)
        .collect()
}

fn parse(words: &[String]) -> Result<Ask, Error> {
    let mut opts = Vec::new();
    let mut rest = Vec::new();
    // Options may come anywhere, as getopt_long lets them in Slurm's sacctmgr.
    for w in words {
        if w.starts_with('-') {
            opts.push(w.as_str());
        } else {
            rest.push(w.as_str());
        }
    }
    let mut noheader = false;
    let mut parsable = None;
    let mut assoc = false;
    for o in opts {
        let flags: Vec<String> = match o.strip_prefix("--") {
            Some(long) => vec![long.to_string()],
            None => o[1..].chars().map(|c| c.to_string()).collect(),
        };
        for f in flags {
            match f.as_str() {
                "n" | "noheader" => noheader = true,
                "P" | "parsable2" => parsable = Some(false),
                "p" | "parsable" => parsable = Some(true),
                "s" | "associations" => assoc = true,
                // Immediate, quiet, verbose, readonly: nothing to confirm or change here.
                "i" | "immediate" | "Q" | "quiet" | "v" | "verbose" | "r" | "readonly" => {}
                other => {
                    return Err(Error::Usage(format!(
                        "sacctmgr: unknown option {other:?}: Flex's sacctmgr takes -n, -P, -p, \
                         -s, -i, -Q, -v"
                    )))
                }
            }
        }
    }
    let (command, entity, specs) = match rest.as_slice() {
        [c, e, specs @ ..] => (c.to_ascii_lowercase(), e.to_ascii_lowercase(), specs),
        _ => {
            return Err(Error::Usage(
                "sacctmgr: give show (or list) and what: user, account, association or qos".into(),
            ))
        }
    };
    if !matches!(command.as_str(), "show" | "list" | "view") {
        return Err(Error::Usage(format!(
            "sacctmgr {command}: Flex's sacctmgr only shows; users, accounts and QOS are set in \
             flexd.toml ([fairshare], [qos.NAME])"
        )));
    }
    let mut ask = Ask {
        entity: Entity::Qos,
        noheader,
        parsable,
        users: Vec::new(),
        accounts: Vec::new(),
        names: Vec::new(),
        format: None,
    };
    let mut named = Vec::new();
    let mut specs = specs.iter().copied().peekable();
    while let Some(s) = specs.next() {
        let lower = s.to_ascii_lowercase();
        if lower == "where" {
            continue;
        }
        if lower == "withassoc" {
            assoc = true;
            continue;
        }
        if matches!(
            lower.as_str(),
            "withdeleted" | "withcoord" | "withsubaccounts"
        ) {
            continue;
        }
        let (k, v) = match s.split_once('=') {
            Some((k, v)) => (k.to_ascii_lowercase(), v.to_string()),
            // `format account,qos` and `user NAME` are also sacctmgr's.
            None if lower == "format" || lower == "user" || lower == "users" => {
                let v = specs.next().unwrap_or_default().to_string();
                (lower, v)
            }
            None => {
                named.extend(list(s));
                continue;
            }
        };
        match k.as_str() {
            "format" => ask.format = Some(v),
            "user" | "users" => ask.users.extend(list(&v)),
            "account" | "accounts" => ask.accounts.extend(list(&v)),
            "name" | "names" => named.extend(list(&v)),
            "cluster" | "clusters" => crate::options::check_clusters(&v).map_err(Error::Input)?,
            "partition" | "partitions" | "qos" | "defaultqos" | "parent" | "tree" => {}
            other => {
                return Err(Error::Usage(format!(
                    "sacctmgr: unknown condition {other:?}: Flex's sacctmgr takes user=, \
                     account=, name=, cluster=, format="
                )))
            }
        }
    }
    ask.entity = match entity.as_str() {
        e if "users".starts_with(e) && !e.is_empty() => {
            ask.users.extend(named);
            Entity::Users { assoc }
        }
        e if "accounts".starts_with(e) && e.len() >= 2 => {
            ask.accounts.extend(named);
            Entity::Accounts { assoc }
        }
        e if "associations".starts_with(e) && e.len() >= 2 => Entity::Assocs,
        "qos" => {
            ask.names = named;
            Entity::Qos
        }
        other => {
            return Err(Error::Usage(format!(
                "sacctmgr show {other}: Flex's sacctmgr shows user, account, association and qos"
            )))
        }
    };
    Ok(ask)
}

/// A configured QOS: its name and `show config`'s `Key=Value` words.
struct Qos {
    name: String,
    words: Vec<(String, String)>,
}

impl Qos {
    fn get(&self, k: &str) -> &str {
        self.words
            .iter()
            .find(|(n, _)| n == k)
            .map_or("", |(_, v)| v.as_str())
    }

    fn allows(&self, user: &str) -> bool {
        let u = self.get("Users");
        u == "ALL" || u.split(',').any(|x| x == user)
    }
}

fn answer(ask: &Ask) -> Result<String, Error> {
    let mut client = Client::connect("sacctmgr")?;
    let config = match client.call(&Request::Config)? {
        Response::Config(c) => c,
        other => return Err(into_error(other)),
    };
    let qos: Vec<Qos> = config
        .iter()
        .filter_map(|(k, v)| {
            Some(Qos {
                name: k.strip_prefix("qos ")?.to_string(),
                words: v
                    .split_whitespace()
                    .filter_map(|w| w.split_once('='))
                    .map(|(a, b)| (a.to_string(), b.to_string()))
                    .collect(),
            })
        })
        .collect();
    let default_qos = config
        .iter()
        .find(|(k, _)| k == "default_qos")
        .map_or_else(|| "normal".to_string(), |(_, v)| v.clone());
    let (records, default_format): (Vec<Record>, &str) = match ask.entity {
        Entity::Qos => (
            qos.iter()
                .filter(|q| ask.names.is_empty() || ask.names.contains(&q.name))
                .map(|q| qos_record(q))
                .collect(),
            "name,priority,gracetime,preemptmode,flags,usagefactor,maxwall,maxtrespu,maxjobspu,maxsubmitpu",
        ),
        entity => {
            let mut users = ask.users.clone();
            if users.is_empty() && !matches!(entity, Entity::Accounts { .. }) {
                users.push(user_name(nix::unistd::getuid()));
            }
            let rows = match client.call(&Request::Shares(ShareQuery {
                users: users.clone(),
            }))? {
                Response::Shares(r) => r,
                other => return Err(into_error(other)),
            };
            let shares = |u: &str| {
                rows.iter()
                    .find(|r| r.user.as_deref() == Some(u))
                    .map_or(1, |r| r.raw_shares)
            };
            let mut out = Vec::new();
            let assoc_of = |u: &str, account: &str| -> Record {
                let allowed: Vec<&str> = qos
                    .iter()
                    .filter(|q| q.allows(u))
                    .map(|q| q.name.as_str())
                    .collect();
                vec![
                    ("cluster", CLUSTER.to_string()),
                    ("account", account.to_string()),
                    ("user", u.to_string()),
                    ("partition", String::new()),
                    ("share", shares(u).to_string()),
                    ("priority", String::new()),
                    ("qos", allowed.join(",")),
                    ("defaultqos", default_qos.clone()),
                    ("defaultaccount", default_account(u)),
                    ("admin", "None".into()),
                    ("name", u.to_string()),
                ]
            };
            for u in &users {
                let account = default_account(u);
                if ask.accounts.is_empty() || ask.accounts.contains(&account) {
                    out.push(assoc_of(u, &account));
                }
            }
            let default = match entity {
                Entity::Users { assoc: false } => "user,defaultaccount,admin",
                Entity::Users { assoc: true } => {
                    "user,defaultaccount,admin,cluster,account,partition,share,maxjobs,maxsubmit,maxwall,qos,defaultqos"
                }
                Entity::Accounts { assoc: false } => "account,descr,org",
                Entity::Accounts { assoc: true } => {
                    "account,descr,org,cluster,partition,user,share,qos,defaultqos"
                }
                _ => "cluster,account,user,partition,share,priority,maxjobs,maxsubmit,maxwall,qos,defaultqos",
            };
            if let Entity::Accounts { assoc: false } = entity {
                // One row per account: those asked, or every account flexd has seen.
                let mut names: Vec<String> = rows
                    .iter()
                    .filter(|r| r.user.is_none())
                    .map(|r| r.account.clone())
                    .chain(out.iter().map(|r| value(r, "account")))
                    .filter(|a| ask.accounts.is_empty() || ask.accounts.contains(a))
                    .collect();
                names.sort();
                names.dedup();
                out = names
                    .into_iter()
                    .map(|a| {
                        vec![
                            ("account", a.clone()),
                            ("descr", a.clone()),
                            ("org", a.clone()),
                            ("name", a),
                        ]
                    })
                    .collect();
            }
            (out, default)
        }
    };
    let format = ask.format.as_deref().unwrap_or(default_format);
    let cols = columns(format)?;
    let mut text = String::new();
    let line = |cells: Vec<String>| -> String {
        match ask.parsable {
            Some(trailing) => cells.join("|") + if trailing { "|" } else { "" },
            None => cells
                .iter()
                .zip(&cols)
                .map(|(c, (_, w))| fit(c, *w))
                .collect::<Vec<_>>()
                .join(" "),
        }
    };
    if !ask.noheader {
        text.push_str(&line(
            cols.iter().map(|(i, _)| FIELDS[*i].1.into()).collect(),
        ));
        text.push('\n');
        if ask.parsable.is_none() {
            let dashes: Vec<String> = cols.iter().map(|(_, w)| "-".repeat(*w)).collect();
            text.push_str(&dashes.join(" "));
            text.push('\n');
        }
    }
    for r in &records {
        text.push_str(&line(
            cols.iter()
                .map(|(i, _)| value(r, FIELDS[*i].0[0]))
                .collect(),
        ));
        text.push('\n');
    }
    Ok(text)
}

fn value(r: &Record, k: &str) -> String {
    r.iter()
        .find(|(n, _)| *n == k)
        .map_or_else(String::new, |(_, v)| v.clone())
}

fn qos_record(q: &Qos) -> Record {
    let limit = |k: &str| match q.get(k) {
        "0" | "" => String::new(),
        v => v.to_string(),
    };
    let wall = match q.get("MaxWall").parse::<u64>() {
        Ok(0) | Err(_) => String::new(),
        Ok(s) => crate::commands::host::slurm_time(s, ""),
    };
    let tres = match q.get("MaxTRESPU") {
        "gres/gpu=0" | "" => String::new(),
        v => v.to_string(),
    };
    vec![
        ("name", q.name.clone()),
        ("priority", q.get("Priority").to_string()),
        ("gracetime", "00:00:00".into()),
        ("preemptmode", "cluster".into()),
        ("flags", String::new()),
        ("usagefactor", "1.000000".into()),
        ("maxwall", wall),
        ("maxtrespu", tres),
        ("maxjobspu", limit("MaxJobsPU")),
        ("maxsubmitpu", limit("MaxSubmitPU")),
        ("qos", q.name.clone()),
    ]
}

/// `account,qos%30`: each field and its width.
fn columns(format: &str) -> Result<Vec<(usize, usize)>, Error> {
    let mut out = Vec::new();
    for item in format.split(',').filter(|s| !s.trim().is_empty()) {
        let (name, width) = item.split_once('%').unwrap_or((item, ""));
        let name = name.trim().to_ascii_lowercase();
        let Some(i) = FIELDS.iter().position(|f| f.0.contains(&name.as_str())) else {
            let names: Vec<&str> = FIELDS.iter().map(|f| f.1).collect();
            return Err(Error::Input(format!(
                "sacctmgr: unknown field {name:?} in format: Flex's sacctmgr knows {}",
                names.join(", ")
            )));
        };
        let width = match width {
            "" => FIELDS[i].2,
            w => w
                .trim_start_matches('-')
                .parse()
                .map_err(|_| Error::Input(format!("sacctmgr: invalid width {w:?} of {name}")))?,
        };
        out.push((i, width));
    }
    Ok(out)
}

/// A cell right-justified in `w`, cut with a `+` when longer, as sacctmgr prints it.
fn fit(c: &str, w: usize) -> String {
    if c.chars().count() > w {
        let mut s: String = c.chars().take(w.saturating_sub(1)).collect();
        s.push('+');
        s
    } else {
        format!("{c:>w$}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn words(s: &str) -> Vec<String> {
        s.split_whitespace().map(String::from).collect()
    }

    #[test]
    fn the_forms_tools_run_parse() {
        let a = parse(&words(
            "-nP show users withassoc format=account,qos where user=ann cluster=flex",
        ))
        .unwrap();
        assert!(a.noheader && a.parsable == Some(false));
        assert!(matches!(a.entity, Entity::Users { assoc: true }));
        assert_eq!(a.users, ["ann"]);
        assert_eq!(a.format.as_deref(), Some("account,qos"));
        let a = parse(&words("-n -s list user ann format=account%256")).unwrap();
        assert_eq!(a.users, ["ann"]);
        assert!(a.parsable.is_none());
        assert_eq!(columns(a.format.as_deref().unwrap()).unwrap(), [(1, 256)]);
        let a = parse(&words("show assoc format=account,user -P -n")).unwrap();
        assert!(a.noheader && a.parsable == Some(false));
        assert_eq!(a.format.as_deref(), Some("account,user"));
        let a = parse(&words("show qos normal")).unwrap();
        assert!(matches!(a.entity, Entity::Qos) && a.names == ["normal"]);
        assert!(parse(&words("add user bob account=x")).is_err());
        assert!(parse(&words("show user cluster=elsewhere")).is_err());
        assert!(columns("account,colour").is_err());
    }

    #[test]
    fn cells_fit_their_width_as_sacctmgr_cuts_them() {
        assert_eq!(fit("ann", 6), "   ann");
        assert_eq!(fit("physics-lab", 6), "physi+");
    }
}
