//! `mean`: a histogram's mean (`_sum` over `_count`).

use super::*;

/// Mean of a histogram (`_sum` over `_count`): e.g. mean prompt length. `model_label`: a
/// gateway's label that names the model where vLLM's says `model_name` (Dynamo's frontend says
/// `model`), copied into `model_name` when the run groups by it.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Mean {
    pub histogram: Vec<String>,
    #[serde(default)]
    pub model_label: String,
}

impl Kind for Mean {
    fn validate(&self) -> Result<(), String> {
        let Mean { histogram, model_label } = self;
        if !model_label.is_empty() && !crate::prom::is_label_name(model_label) {
            return Err(format!("model_label {model_label:?} is not a label name"));
        }
        nonempty(histogram, "histogram")
    }

    fn required_series(&self) -> Vec<Vec<String>> {
        vec![hist(&self.histogram, "_sum")]
    }

    fn queries(&self, resolved: &Resolved, ctx: &QueryContext) -> Result<SignalQueries, String> {
        if self.model_label.is_empty() {
            Ok(plain(mean_less_means(&resolved.names, ctx)))
        } else {
            Ok(plain(relabelled_mean(&resolved.names[0], &self.model_label, ctx)))
        }
    }

    fn replica_breakdown(&self) -> bool {
        true
    }
}

/// A gateway histogram's mean whose model label is `model_label` (Dynamo's frontend: `model`):
/// that label copied into `model_name` first when the run groups by `model_name`, so its scopes
/// are the engines'. A series that already carries `model_name` keeps it (the copy needs a value).
fn relabelled_mean(series: &str, model_label: &str, ctx: &QueryContext) -> String {
    if !ctx.group_by.iter().any(|g| g == "model_name") {
        return mean_query(series, ctx);
    }
    let (by, r, fam) = (ctx.group_by.join(", "), promql_duration(ctx.range), family_of(series));
    let part = |suffix: &str| {
        format!(
            "sum by ({by}) (label_replace(rate({}[{r}]), \"model_name\", \"$1\", \"{model_label}\", \"(.+)\"))",
            ctx.selector.without(&ctx.group_by).series(&format!("{fam}{suffix}"), &[])
        )
    };
    format!("{} / {}", part("_sum"), part("_count"))
}
