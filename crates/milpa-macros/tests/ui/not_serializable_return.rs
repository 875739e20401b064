use milpa::tool;

struct Secret;

/// Returns something that is not JSON.
#[tool]
fn secret() -> Secret {
    Secret
}

fn main() {}
