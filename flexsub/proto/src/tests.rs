//! Round trips of messages and rows, and hostile input for the frame decoder.

use crate::*;
use gres_plugin::Request as ResourceRequest;
use std::borrow::Cow;

fn row(id: u64, name: &str, reason: Option<&str>) -> QueueRow<'static> {
    QueueRow {
        id: JobId(id),
        name: Cow::Owned(name.into()),
        user: Cow::Borrowed("ann"),
        state: JobState::Pending,
        elapsed_s: 0,
        time_limit_s: 60,
        units: Cow::Borrowed("4"),
        start: None,
        host: None,
        reason: reason.map(|r| Cow::Owned(r.into())),
        array: None,
    }
}

#[test]
fn queue_rows_are_arrays_read_back_borrowed_where_they_can_be() {
    let rows = vec![
        row(1, "plain", Some("Resources")),
        row(2, "say \"hi\"", None),
    ];
    let answer = Response::QueueRows(RowsPage {
        rows: QueueRows::new(rows.clone().into_iter()),
        next: Some(JobId(2)),
    });
    let body = serde_json::to_vec(&answer).unwrap();
    let text = String::from_utf8(body.clone()).unwrap();
    assert!(
        text.starts_with(
            r#"{"QueueRows":{"rows":[[1,"plain","ann","PENDING",0,60,"4",null,null,"Resources"]"#
        ),
        "{text}"
    );
    let mut read = Vec::new();
    assert_eq!(
        read_queue_rows(&body, |r| read.push(r)).unwrap(),
        Some(Some(JobId(2)))
    );
    assert_eq!(read, rows);
    assert!(matches!(read[0].name, Cow::Borrowed("plain")));
    // An escaped string cannot be borrowed; it is unescaped into its own.
    assert!(matches!(&read[1].name, Cow::Owned(n) if n == "say \"hi\""));
    // The whole answer decodes as a Response, too.
    let back: Response = serde_json::from_slice(&body).unwrap();
    assert_eq!(back, answer);
    let Response::QueueRows(RowsPage { rows: back, .. }) = back else {
        unreachable!()
    };
    assert_eq!(back.rows().unwrap(), rows);
    // The fields in the other order, and the last page.
    let last = br#"{"QueueRows":{"next":null,"rows":[]}}"#;
    assert_eq!(read_queue_rows(last, |_| {}).unwrap(), Some(None));
}

#[test]
fn other_answers_are_not_rows() {
    for answer in [
        Response::error(ErrorKind::PermissionDenied, "no"),
        Response::Pong,
    ] {
        let body = serde_json::to_vec(&answer).unwrap();
        let mut n = 0;
        assert_eq!(read_queue_rows(&body, |_| n += 1).unwrap(), None);
        assert_eq!(n, 0);
    }
    for bad in [
        &br#"{"QueueRows":{"rows":[[1,"x"]],"next":null}}"#[..],
        br#"{"QueueRows":{"rows":[],"next":null}} x"#,
        br#"{"QueueRows":{"rows":[]}}"#,
        br#"{"QueueRows":{"next":null}}"#,
        br#"{"QueueRows":{"rows":[],"rows":[],"next":null}}"#,
        br#"{"QueueRows":[]}"#,
    ] {
        let e = read_queue_rows(bad, |_| {});
        assert!(e.is_err(), "{}: {e:?}", String::from_utf8_lossy(bad));
    }
}

#[test]
fn units_say_what_is_held_else_what_is_asked() {
    let mut asked = ResourceRequest::leaves(4, 60);
    assert_eq!(units_text(&[], &asked), "4");
    assert_eq!(units_text(&[1000, 1000], &asked), "2");
    assert_eq!(units_text(&[250, 500], &asked), "0.75gpu");
    asked.leaves = None;
    asked.gpus = Some(0.5);
    asked.mem_bytes = Some(16 << 30);
    assert_eq!(units_text(&[], &asked), "gpu=0.5,gpumem=16G");
    asked.gpus = None;
    assert_eq!(units_text(&[], &asked), "gpumem=16G");
}

#[test]
fn frames_round_trip_and_split_anywhere() {
    let msg = Request::Cancel(CancelRequest {
        jobs: vec![JobId(3), JobId(9)],
        signal: Some(15),
        tasks: vec![],
    });
    let bytes = encode(&msg);
    for cut in 0..bytes.len() {
        assert!(decode::<Request>(&bytes[..cut], DEFAULT_MAX_FRAME)
            .unwrap()
            .is_none());
    }
    let (back, used) = decode::<Request>(&bytes, DEFAULT_MAX_FRAME)
        .unwrap()
        .unwrap();
    assert_eq!((back, used), (msg.clone(), bytes.len()));
    let mut r = std::io::Cursor::new(bytes);
    assert_eq!(read_frame::<Request>(&mut r, 1 << 10).unwrap(), msg);
}

#[test]
fn oversized_and_malformed_frames_are_errors() {
    let mut big = (1u32 << 30).to_be_bytes().to_vec();
    big.extend_from_slice(b"{}");
    assert!(matches!(
        decode::<Request>(&big, DEFAULT_MAX_FRAME),
        Err(FrameError::TooLarge { .. })
    ));
    let mut bad = 3u32.to_be_bytes().to_vec();
    bad.extend_from_slice(b"{x}");
    assert!(matches!(
        decode::<Request>(&bad, 100),
        Err(FrameError::Malformed(_))
    ));
}

#[test]
fn states_parse_by_name_and_code() {
    assert_eq!(JobState::parse("pd"), Some(JobState::Pending));
    assert_eq!(JobState::parse("NODE_FAIL"), Some(JobState::NodeFail));
    assert_eq!(JobState::parse("canceled"), Some(JobState::Cancelled));
    assert_eq!(JobState::parse("bogus"), None);
}

mod hostile {
    //! Hostile input for the frame decoder: never a panic, never a read past the limit.
    use crate::*;
    use proptest::prelude::*;

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(5000))]

        #[test]
        fn arbitrary_bytes_never_panic(bytes in prop::collection::vec(any::<u8>(), 0..512)) {
            match decode::<Request>(&bytes, 256) {
                Ok(Some((_, used))) => prop_assert!(used <= bytes.len()),
                Ok(None) => {}
                Err(e) => prop_assert!(!e.to_string().is_empty()),
            }
            let mut r = std::io::Cursor::new(&bytes);
            let _ = read_frame::<Hello>(&mut r, 256);
        }

        #[test]
        fn valid_length_with_junk_body(body in "\\PC{0,200}") {
            let mut f = (body.len() as u32).to_be_bytes().to_vec();
            f.extend_from_slice(body.as_bytes());
            if let Err(e) = decode::<Request>(&f, DEFAULT_MAX_FRAME) {
                prop_assert!(e.to_string().starts_with("malformed frame"));
            }
        }
    }
}

/// A row of any content, as `QueueRows` writes it.
fn any_row() -> impl proptest::strategy::Strategy<Value = QueueRow<'static>> {
    use proptest::prelude::*;
    let text = || prop_oneof![Just(String::new()), "[a-z0-9_-]{1,12}", any::<String>()];
    let state = prop::sample::select(JobState::ALL.to_vec());
    let numbers = (
        any::<u64>(),
        any::<u64>(),
        any::<u64>(),
        any::<Option<u64>>(),
    );
    let texts = (text(), text(), text(), prop::option::of(text()));
    let more = (prop::option::of(text()), prop::option::of(text()));
    (numbers, texts, more, state).prop_map(
        |(
            (id, elapsed_s, time_limit_s, start),
            (name, user, units, host),
            (reason, array),
            state,
        )| {
            QueueRow {
                id: JobId(id),
                name: name.into(),
                user: user.into(),
                state,
                elapsed_s,
                time_limit_s,
                units: units.into(),
                start,
                host: host.map(Cow::Owned),
                reason: reason.map(Cow::Owned),
                array: array.map(Cow::Owned),
            }
        },
    )
}

proptest::proptest! {
    /// The compact reading of a page and serde_json's read the same rows, compact or pretty.
    #[test]
    fn pages_read_as_serde_json_reads_them(
        rows in proptest::collection::vec(any_row(), 0..8),
        next in proptest::option::of(0u64..1000),
    ) {
        let answer = Response::QueueRows(RowsPage {
            rows: QueueRows::new(rows.clone().into_iter()),
            next: next.map(JobId),
        });
        for body in [serde_json::to_vec(&answer).unwrap(), serde_json::to_vec_pretty(&answer).unwrap()] {
            let mut read = Vec::new();
            let page = read_queue_rows(&body, |r| read.push(r)).unwrap();
            proptest::prop_assert_eq!(page, Some(next.map(JobId)));
            proptest::prop_assert_eq!(&read, &rows);
        }
    }
}

#[test]
fn plain_rows_are_borrowed_and_odd_pages_refused() {
    let body = br#"{"QueueRows":{"rows":[[3,"a","b","NODE_FAIL",1,2,"1",5,"h","r","7"],[4,"a\nb","b","PENDING",0,0,"",null,null,null]],"next":4}}"#;
    let mut read = Vec::new();
    assert_eq!(
        read_queue_rows(body, |r| read.push(r)).unwrap(),
        Some(Some(JobId(4)))
    );
    assert!(matches!(read[0].array, Some(Cow::Borrowed("7"))));
    assert!(matches!(&read[1].name, Cow::Owned(n) if n == "a\nb"));
    assert_eq!(read[1].array, None);
    for bad in [
        &br#"{"QueueRows":{"rows":[[01,"a","b","PENDING",0,0,"",null,null,null]],"next":null}}"#[..],
        br#"{"QueueRows":{"rows":[[1,"a","b","WAITING",0,0,"",null,null,null]],"next":null}}"#,
        br#"{"QueueRows":{"rows":[[1,"a","b","PENDING",0,0,"",null,null,null,null]],"next":null}}"#,
        br#"{"QueueRows":{"rows":[[1,"a","b","PENDING",0,0,"",null,null,null,"1",2]],"next":null}}"#,
        br#"{"QueueRows":{"rows":[[1,"a","b","PENDING",-1,0,"",null,null,null]],"next":null}}"#,
        br#"{"QueueRows":{"rows":[[1,"a","b","PENDING",0,0,"",null,null,null]] "next":null}}"#,
        br#"{"QueueRows":{"rows":[],"next":1.5}}"#,
        br#"{"QueueRows":{"rows":[],"next":null}}}"#,
        br#"{"QueueRows":{"rows":["#,
    ] {
        let e = read_queue_rows(bad, |_| {});
        assert!(e.is_err(), "{}: {e:?}", String::from_utf8_lossy(bad));
    }
}
