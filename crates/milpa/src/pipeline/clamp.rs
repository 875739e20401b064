//! Stage 3, `clamp`: move numeric arguments into `[min, max]` and cut long strings.
//!
//! Both clamp forms work: `[lo, hi]` and `{min, max, maxLength}` (the original silently
//! ignored the list form its own attribute documented).

use serde_json::Value;

use crate::definition::Clamp;
use crate::inspect::StageFacts;
use crate::inspect::{InvocationStep, StepPresence, StepRole};
use crate::pipeline::{Call, Flow};
use crate::pipeline::{StepKind, step};

// The check is inlined into the pipeline: most tools declare no clamps.
#[inline]
pub(crate) fn run(call: &mut Call<'_>) -> Flow {
    if call.tool().definition.options().clamps.is_empty() {
        return Flow::Continue;
    }
    apply_all(call)
}

fn apply_all(call: &mut Call<'_>) -> Flow {
    let clamps = &call.tool().definition.options().clamps;
    if let Value::Object(args) = &mut call.args {
        for (field, clamp) in clamps {
            if let Some(value) = args.get_mut(field) {
                apply(value, clamp);
            }
        }
    }
    Flow::Continue
}

/// Applies one clamp to one value (null and non-matching types are left alone).
pub(crate) fn apply(value: &mut Value, clamp: &Clamp) {
    match value {
        Value::Number(n) => {
            let current = n.as_f64().unwrap_or(0.0);
            if let Some(min) = &clamp.min
                && current < min.as_f64().unwrap_or(f64::MIN)
            {
                *value = Value::Number(min.clone());
                return;
            }
            if let Some(max) = &clamp.max
                && current > max.as_f64().unwrap_or(f64::MAX)
            {
                *value = Value::Number(max.clone());
            }
        }
        Value::String(text) => {
            if let Some(limit) = clamp.max_length
                && let Some((cut, _)) = text.char_indices().nth(limit)
            {
                text.truncate(cut);
            }
        }
        _ => {}
    }
}

pub(crate) fn describe(facts: &StageFacts<'_>) -> InvocationStep {
    let clamps = &facts.tool.options().clamps;
    if clamps.is_empty() {
        return step(
            StepKind::Clamp,
            StepRole::Transform,
            StepPresence::Skipped,
            false,
            false,
            "the tool declares no clamps",
        );
    }
    let parts: Vec<String> = clamps
        .iter()
        .map(|(field, c)| {
            let mut bounds = Vec::new();
            if c.min.is_some() || c.max.is_some() {
                let show = |n: &Option<serde_json::Number>| {
                    n.as_ref().map_or("…".to_owned(), |n| n.to_string())
                };
                bounds.push(format!("[{}, {}]", show(&c.min), show(&c.max)));
            }
            if let Some(max) = c.max_length {
                bounds.push(format!("maxLength {max}"));
            }
            format!("{field} → {}", bounds.join(", "))
        })
        .collect();
    step(
        StepKind::Clamp,
        StepRole::Transform,
        StepPresence::Active,
        false,
        true,
        format!("tool clamps: {}", parts.join("; ")),
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn clamps_numbers_and_strings() {
        let range = Clamp::range(0, 100);
        let mut v = json!(500);
        apply(&mut v, &range);
        assert_eq!(v, json!(100));
        let mut v = json!(-3.5);
        apply(&mut v, &range);
        assert_eq!(v, json!(0));
        let mut v = json!(42);
        apply(&mut v, &range);
        assert_eq!(v, json!(42));
        let mut v = json!("héllo wörld");
        apply(&mut v, &Clamp::max_length(5));
        assert_eq!(v, json!("héllo"));
        let mut v = Value::Null;
        apply(&mut v, &range);
        assert_eq!(v, Value::Null);
    }
}
