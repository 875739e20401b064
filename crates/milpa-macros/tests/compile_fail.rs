//! Mistakes the macros refuse at compile time, each with a message that says how to fix it
//! (the expected messages are the `.stderr` files next to the cases in `tests/ui/`).

#[test]
fn compile_errors() {
    let cases = trybuild::TestCases::new();
    cases.compile_fail("tests/ui/*.rs");
}
