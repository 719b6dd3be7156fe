//! Send one protocol request to the flexd at $FLEX_SOCKET and print the response, both as
//! JSON. The end-to-end tests run it as other users (`Command::uid`) to check what flexd
//! allows whom.

fn main() {
    let Some(req) = std::env::args().nth(1) else {
        eprintln!("usage: flex-testclient REQUEST-JSON (with FLEX_SOCKET set)");
        std::process::exit(2);
    };
    let req: flex_proto::Request = match serde_json::from_str(&req) {
        Ok(r) => r,
        Err(e) => {
            eprintln!("flex-testclient: bad request: {e}");
            std::process::exit(2);
        }
    };
    let socket = std::env::var("FLEX_SOCKET").unwrap_or_else(|_| {
        eprintln!("flex-testclient: FLEX_SOCKET is not set");
        std::process::exit(2);
    });
    let resp = flex_tests::Client::connect(&socket).and_then(|mut c| c.request(&req));
    match resp {
        Ok(r) => println!(
            "{}",
            serde_json::to_string(&r).expect("responses serialize")
        ),
        Err(e) => {
            eprintln!("flex-testclient: {e}");
            std::process::exit(1);
        }
    }
}
