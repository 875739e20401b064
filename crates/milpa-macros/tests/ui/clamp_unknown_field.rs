use milpa::tool;

/// Sets the volume.
#[tool(clamps(volume = [0, 100]))]
fn set_volume(level: i64) -> i64 {
    level
}

fn main() {}
