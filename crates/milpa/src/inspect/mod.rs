//! Inspection: what the pipeline would do for one tool and one caller, without running
//! anything — the read-only counterpart of plan mode.
//!
//! The plan is built from the same stage table the executor walks
//! ([`StepKind::ORDER`](crate::StepKind::ORDER)); each stage's module describes itself next
//! to the code that runs it, so the description cannot drift from the behaviour. The plan
//! never invents a caller: an anonymous context stays anonymous, and the plan says what
//! that means ("authorize would deny").

mod facts;
mod plan;
mod text;

pub(crate) use facts::StageFacts;
pub use plan::{
    InvocationPlan, InvocationPlanBuilder, InvocationStep, PlanContext, RegistryWiring,
    SCHEMA_VERSION, StepPresence, StepRole, WiringState,
};
