#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    for line in String::from_utf8_lossy(data).lines() {
        let _ = keel_protocol::input::parse_input_line(line);
    }
});
