//! Per-workload overrides read from a pod's `waterline.io/` annotations
//! (docs/policy.md#per-workload-overrides). One home for their names and rules: the
//! adapters (scorer, collector, extender) keep only the prefixed keys and parse them here,
//! so a bad value is the same error, naming the annotation, wherever it arrives.

use std::collections::BTreeMap;

/// Only annotations with this prefix travel in `PodInfo.annotations`.
pub const ANNOTATION_PREFIX: &str = "waterline.io/";
/// Multiplies the policy estimator's cpu and memory factors for this pod.
pub const ESTIMATE_FACTOR: &str = "waterline.io/estimate-factor";
/// `"off"`: the pod passes every load threshold, like a DaemonSet pod (`"on"`: the default).
pub const LOAD_FILTER: &str = "waterline.io/load-filter";

/// The largest estimate factor accepted: beyond it a typo (`85` for `0.85`) would price
/// one pod above any node.
const MAX_ESTIMATE_FACTOR: f64 = 100.0;

/// What a pod's annotations override; the default overrides nothing.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct Overrides {
    /// Multiplies `estimator.cpuFactor` and `estimator.memoryFactor`.
    pub estimate_factor: Option<f64>,
    pub load_filter_off: bool,
}

#[derive(Clone, Debug, thiserror::Error, PartialEq, Eq)]
#[error("pod annotation {key}: {why} (got '{value}')")]
pub struct OverrideError {
    pub key: String,
    pub value: String,
    pub why: String,
}

impl Overrides {
    /// The overrides `annotations` ask for; a known key with a bad value is an error. Keys
    /// without the prefix, and prefixed keys this version does not know, are ignored: a
    /// pod annotated for a newer scorer must still be placed by an older one.
    pub fn from_annotations<'a>(
        annotations: impl IntoIterator<Item = (&'a String, &'a String)>,
    ) -> Result<Overrides, OverrideError> {
        let mut overrides = Overrides::default();
        for (key, value) in annotations {
            if !key.starts_with(ANNOTATION_PREFIX) {
                continue;
            }
            let error = |why: &str| OverrideError {
                key: key.clone(),
                value: value.clone(),
                why: why.to_owned(),
            };
            match key.as_str() {
                ESTIMATE_FACTOR => {
                    let factor: f64 =
                        value.trim().parse().map_err(|_| error("must be a number such as 1.5"))?;
                    if !factor.is_finite() || factor <= 0.0 || factor > MAX_ESTIMATE_FACTOR {
                        return Err(error("must be a number > 0 and at most 100"));
                    }
                    overrides.estimate_factor = Some(factor);
                }
                LOAD_FILTER => {
                    overrides.load_filter_off = match value.trim() {
                        "off" => true,
                        "on" => false,
                        _ => return Err(error("must be \"off\" or \"on\"")),
                    }
                }
                _ => {}
            }
        }
        Ok(overrides)
    }
}

/// The `waterline.io/` annotations of `annotations`, the only ones `PodInfo` carries.
pub fn waterline_annotations<'a>(
    annotations: impl IntoIterator<Item = (&'a String, &'a String)>,
) -> BTreeMap<String, String> {
    annotations
        .into_iter()
        .filter(|(key, _)| key.starts_with(ANNOTATION_PREFIX))
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(pairs: &[(&str, &str)]) -> Result<Overrides, OverrideError> {
        let map: BTreeMap<String, String> =
            pairs.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect();
        Overrides::from_annotations(&map)
    }

    #[test]
    fn overrides_are_read_from_the_prefixed_keys_only() {
        let o = parse(&[
            (ESTIMATE_FACTOR, "2"),
            (LOAD_FILTER, "off"),
            ("kubectl.kubernetes.io/last-applied-configuration", "{}"),
        ])
        .unwrap();
        assert_eq!(o, Overrides { estimate_factor: Some(2.0), load_filter_off: true });
        assert_eq!(parse(&[(LOAD_FILTER, "on")]).unwrap(), Overrides::default());
        assert_eq!(parse(&[]).unwrap(), Overrides::default());
    }

    #[test]
    fn bad_values_name_the_annotation() {
        let err = parse(&[(ESTIMATE_FACTOR, "lots")]).unwrap_err().to_string();
        assert_eq!(
            err,
            "pod annotation waterline.io/estimate-factor: must be a number such as 1.5 (got 'lots')"
        );
        for bad in ["0", "-1", "NaN", "inf", "101"] {
            assert!(parse(&[(ESTIMATE_FACTOR, bad)]).is_err(), "{bad}");
        }
        let err = parse(&[(LOAD_FILTER, "false")]).unwrap_err().to_string();
        assert!(err.contains("waterline.io/load-filter: must be \"off\" or \"on\""), "{err}");
        // A key of a newer version is ignored, not refused.
        assert_eq!(parse(&[("waterline.io/newer-knob", "2")]).unwrap(), Overrides::default());
    }

    #[test]
    fn only_waterline_annotations_are_kept() {
        let map: BTreeMap<String, String> =
            [("waterline.io/load-filter", "off"), ("other/key", "x")]
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .into();
        let kept = waterline_annotations(&map);
        assert_eq!(kept.keys().collect::<Vec<_>>(), ["waterline.io/load-filter"]);
    }
}
