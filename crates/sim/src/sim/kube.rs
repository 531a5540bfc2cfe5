//! kube-state-metrics' series, for scenarios with a rollout: each model's Deployment generation and
//! each pod's vllm container.

use super::families::{Fam, Kind, Line, Metric};
use super::names::{host_stems, NAMESPACE};
use crate::events::Life;
use crate::{EventKind, EventSpec, ReplicaInfo, ScenarioSpec, DEFAULT_IMAGE, FIRST_GENERATION};
use vllm_diag::source::Labels;

/// kube-state-metrics' view of the fleet (only when some event is a rollout): each model's
/// Deployment generation (metadata, and observed one scrape later) and each live pod's vllm
/// container (image, restarts).
pub(super) fn kube_state_metrics(
    spec: &ScenarioSpec,
    names: &[Vec<ReplicaInfo>],
    lives: &[Vec<Life>],
    new_pods: &[Vec<Vec<String>>],
    times_ms: &[i64],
) -> Vec<(Fam, Metric)> {
    let stems = host_stems(&spec.models);
    let end_ms = spec.window_end().timestamp_millis();
    let interval_ms = spec.interval.as_millis() as i64;
    let mut target = Labels::new();
    target.insert("job".into(), "kube-state-metrics".into());
    target.insert("instance".into(), "kube-state-metrics:8080".into());
    let gauge = |fam: Fam, labels: Labels, values: Vec<Option<f64>>| {
        let suffix = if fam.kind() == Kind::Counter { "_total" } else { "" };
        (fam, Metric { labels, lines: vec![Line { suffix, le: None, values }] })
    };
    let mut out = vec![gauge(Fam::Up, target.clone(), times_ms.iter().map(|_| Some(1.0)).collect())];
    target.insert("namespace".into(), NAMESPACE.into());
    for (mi, model) in spec.models.iter().enumerate() {
        let rollouts: Vec<&EventSpec> = spec.events.iter().filter(|e| e.model == model.name && e.kind == EventKind::Rollout).collect();
        let at: Vec<i64> = rollouts.iter().map(|e| end_ms - e.at_before_end.as_millis() as i64).collect();
        let mut labels = target.clone();
        labels.insert("deployment".into(), stems[mi].clone());
        let generation = |lag: i64| -> Vec<Option<f64>> {
            times_ms.iter().map(|t| Some((FIRST_GENERATION + at.iter().filter(|a| **a + lag <= *t).count() as u64) as f64)).collect()
        };
        out.push(gauge(Fam::KsmGeneration, labels.clone(), generation(0)));
        out.push(gauge(Fam::KsmObservedGeneration, labels, generation(interval_ms)));

        for (ri, life) in lives[mi].iter().enumerate() {
            // (pod, image, from, until): the pods this replica ran in, one after the other
            let mut pods: Vec<(String, String, i64, i64)> = Vec::new();
            let mut pod = names[mi][ri].pod.clone();
            let mut image = DEFAULT_IMAGE.to_string();
            let mut from = life.added_ms.unwrap_or(i64::MIN);
            let mut restarts: Vec<i64> = Vec::new();
            for o in &life.outages {
                match o.rollout {
                    Some(k) => {
                        pods.push((pod.clone(), image.clone(), from, o.down_ms));
                        pod = new_pods[mi].get(k).and_then(|p| p.get(ri)).cloned().unwrap_or(pod);
                        if let Some(img) = rollouts.get(k).and_then(|e| e.image.clone()) {
                            image = img;
                        }
                        from = o.up_ms;
                    }
                    None => restarts.push(o.down_ms),
                }
            }
            pods.push((pod, image, from, life.removed_ms.unwrap_or(i64::MAX)));
            for (pod, image, from, until) in pods {
                let live = |t: i64| from <= t && t < until;
                let mut l = target.clone();
                l.insert("pod".into(), pod);
                l.insert("container".into(), "vllm".into());
                let restarted: Vec<Option<f64>> =
                    times_ms.iter().map(|t| live(*t).then(|| restarts.iter().filter(|r| **r >= from && **r <= *t).count() as f64)).collect();
                if restarted.iter().all(Option::is_none) {
                    continue;
                }
                out.push(gauge(Fam::KsmRestarts, l.clone(), restarted));
                l.insert("image".into(), image);
                l.insert("image_id".into(), String::new());
                out.push(gauge(Fam::KsmContainerInfo, l, times_ms.iter().map(|t| live(*t).then_some(1.0)).collect()));
            }
        }
    }
    out
}
