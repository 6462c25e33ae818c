#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| keel_core::fuzzing::bedrock_eventstream(data));
