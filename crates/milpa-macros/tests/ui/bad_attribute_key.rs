use milpa::tool;

/// Adds two integers.
#[tool(nmae = "sum")]
fn add(a: i64, b: i64) -> i64 {
    a + b
}

fn main() {}
