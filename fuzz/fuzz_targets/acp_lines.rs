//! An ACP agent's stdout: the first byte sets the line limit (small, so oversized lines
//! are common), the rest goes through the bounded line reader and message decoding.
#![no_main]

use std::sync::OnceLock;

use libfuzzer_sys::fuzz_target;

fn runtime() -> &'static tokio::runtime::Runtime {
    static RUNTIME: OnceLock<tokio::runtime::Runtime> = OnceLock::new();
    RUNTIME.get_or_init(|| {
        tokio::runtime::Builder::new_current_thread()
            .build()
            .expect("a tokio runtime")
    })
}

fuzz_target!(|data: &[u8]| {
    let Some((limit, output)) = data.split_first() else {
        return;
    };
    let max_line = usize::from(*limit) * 16 + 1;
    runtime().block_on(agentplane_acp_client::fuzzing::agent_output(
        output.to_vec(),
        max_line,
    ));
});
