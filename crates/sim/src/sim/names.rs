//! The names the fleet is known by: a host stem per model, each replica's instance, pod, node and
//! GPU UUID, and the pods each rollout gives a model's replicas.

use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

use crate::{EventKind, ModelSpec, ReplicaInfo, ScenarioSpec};

pub(super) const NAMESPACE: &str = "inference";

/// Host names from model names: `meta-llama/Llama-3.1-8B-Instruct` -> `llama-3-1-8b-instruct`.
fn slug(text: &str) -> String {
    let mut out = String::new();
    for c in text.chars() {
        if c.is_ascii_alphanumeric() {
            out.push(c.to_ascii_lowercase());
        } else if !out.is_empty() && !out.ends_with('-') {
            out.push('-');
        }
    }
    let trimmed = out.trim_end_matches('-');
    if trimmed.is_empty() {
        "model".to_string()
    } else {
        trimmed.to_string()
    }
}

/// One host-name stem per model, unique across the fleet.
pub(crate) fn host_stems(models: &[ModelSpec]) -> Vec<String> {
    let short: Vec<String> = models.iter().map(|m| slug(m.name.rsplit('/').next().unwrap_or(&m.name))).collect();
    let unique = |v: &[String]| {
        let mut s = v.to_vec();
        s.sort();
        s.dedup();
        s.len() == v.len()
    };
    if unique(&short) {
        return short;
    }
    let long: Vec<String> = models.iter().map(|m| slug(&m.name)).collect();
    if unique(&long) {
        return long;
    }
    long.iter().enumerate().map(|(i, s)| format!("{s}-m{i}")).collect()
}

/// Characters Kubernetes uses in generated name suffixes (no vowels, no look-alikes).
const K8S_ALPHABET: &[u8] = b"bcdfghjklmnpqrstvwxz2456789";

fn k8s_suffix(rng: &mut ChaCha8Rng, len: usize) -> String {
    (0..len).map(|_| char::from(K8S_ALPHABET[rng.gen_range(0..K8S_ALPHABET.len())])).collect()
}

fn gpu_uuid(rng: &mut ChaCha8Rng) -> String {
    let hex = |rng: &mut ChaCha8Rng, n: usize| -> String { (0..n).map(|_| char::from(b"0123456789abcdef"[rng.gen_range(0..16)])).collect() };
    format!("GPU-{}-{}-{}-{}-{}", hex(rng, 8), hex(rng, 4), hex(rng, 4), hex(rng, 4), hex(rng, 12))
}

/// Names of every replica, model by model: instance, pod (one Deployment per model, so one
/// template hash), node and GPU. Drawn from their own stream, so they do not move when the
/// simulation changes.
pub(crate) fn fleet_names(spec: &ScenarioSpec) -> Vec<Vec<ReplicaInfo>> {
    let stems = host_stems(&spec.models);
    let mut node = 0u32;
    let mut out = Vec::with_capacity(spec.models.len());
    for (mi, model) in spec.models.iter().enumerate() {
        let mut rng = ChaCha8Rng::seed_from_u64(spec.seed ^ 0x6e61_6d65_735f_7631);
        rng.set_stream(mi as u64);
        let template = k8s_suffix(&mut rng, 10);
        let mut replicas = Vec::with_capacity(model.replicas as usize);
        for index in 0..model.replicas {
            let stem = &stems[mi];
            replicas.push(ReplicaInfo {
                model: model.name.clone(),
                index,
                instance: format!("{stem}-{index}:8000"),
                pod: format!("{stem}-{template}-{}", k8s_suffix(&mut rng, 5)),
                node: format!("gpu-node-{node:02}"),
                gpu_uuid: gpu_uuid(&mut rng),
            });
            node += 1;
        }
        out.push(replicas);
    }
    out
}

/// The pod names each rollout gives a model's replicas: `[model][rollout][replica]`, one new
/// template hash per rollout, drawn from their own stream.
pub(super) fn rollout_pods(spec: &ScenarioSpec) -> Vec<Vec<Vec<String>>> {
    let stems = host_stems(&spec.models);
    spec.models
        .iter()
        .enumerate()
        .map(|(mi, model)| {
            let rollouts = spec.events.iter().filter(|e| e.model == model.name && e.kind == EventKind::Rollout).count();
            (0..rollouts)
                .map(|k| {
                    let mut rng = ChaCha8Rng::seed_from_u64(spec.seed ^ 0x726f_6c6c_6f75_7431);
                    rng.set_stream(((mi as u64) << 32) | k as u64);
                    let template = k8s_suffix(&mut rng, 10);
                    (0..model.replicas).map(|_| format!("{}-{template}-{}", stems[mi], k8s_suffix(&mut rng, 5))).collect()
                })
                .collect()
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn host_names_come_from_the_model_name_and_stay_unique() {
        let m = |name: &str| ModelSpec::new(name, 1, 1.0);
        assert_eq!(host_stems(&[m("meta-llama/Llama-3.1-8B-Instruct")]), vec!["llama-3-1-8b-instruct"]);
        let stems = host_stems(&[m("a/Model"), m("b/Model")]);
        assert_eq!(stems, vec!["a-model", "b-model"]);
        let stems = host_stems(&[m("a/M.x"), m("a/M-x")]);
        assert_ne!(stems[0], stems[1]);
    }

    #[test]
    fn pod_names_look_like_a_deployments_pods() {
        let spec = crate::ScenarioSpec::from_toml_str(
            "name = \"x\"\nseed = 3\nstart = \"2026-01-15T08:00:00Z\"\ninterval = \"30s\"\nbaseline = \"1m\"\nwindow = \"1m\"\n\
             [[model]]\nname = \"org/Big-Model\"\nreplicas = 3\nrate = 1.0\n",
        )
        .expect("parses");
        let names = fleet_names(&spec);
        let pods: Vec<&str> = names[0].iter().map(|r| r.pod.as_str()).collect();
        let template: Vec<&str> = pods.iter().map(|p| &p[..p.len() - 6]).collect();
        assert!(template.iter().all(|t| *t == template[0]), "one template hash: {pods:?}");
        assert!(pods.iter().all(|p| p.starts_with("big-model-") && p.len() == "big-model-".len() + 16), "{pods:?}");
        let mut unique = pods.clone();
        unique.sort();
        unique.dedup();
        assert_eq!(unique.len(), 3);
        assert_eq!(names[0][2].instance, "big-model-2:8000");
        assert_eq!(names[0][1].node, "gpu-node-01");
        assert!(names[0][0].gpu_uuid.starts_with("GPU-") && names[0][0].gpu_uuid.len() == 40);
    }
}
