use milpa::tool;

/// Reads through a raw pointer.
#[tool]
fn peek(pointer: *const u8) -> u8 {
    let _ = pointer;
    0
}

fn main() {}
