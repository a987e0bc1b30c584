//! Prometheus rule files as the policy's tools read them: the groups of a plain rule file
//! (`groups:`) or of a PrometheusRule object (`spec.groups`), each rule's record or alert
//! name and its expression. Read by `waterline-collector policy check` (every expression
//! parses, every recording rule the policy reads is recorded) and by `waterline-bench
//! recording-rules --isolated` (each rule timed on its own). Pure: the text in, the groups
//! out; the caller reads the file.

use serde::Deserialize;

/// Either shape of a rule file.
#[derive(Deserialize)]
pub struct RuleFile {
    groups: Option<Vec<RuleGroup>>,
    spec: Option<RuleSpec>,
}

impl RuleFile {
    /// The groups of either shape (none for a file with neither).
    pub fn parse(text: &str) -> Result<Vec<RuleGroup>, serde_yaml::Error> {
        let file: RuleFile = serde_yaml::from_str(text)?;
        Ok(file.groups.or(file.spec.map(|s| s.groups)).unwrap_or_default())
    }
}

#[derive(Deserialize)]
struct RuleSpec {
    groups: Vec<RuleGroup>,
}

#[derive(Debug, Deserialize, PartialEq)]
pub struct RuleGroup {
    pub name: String,
    /// As written (`30s`, `1m`); the caller parses it when it needs the span.
    pub interval: Option<String>,
    pub rules: Vec<Rule>,
}

#[derive(Debug, Deserialize, PartialEq)]
pub struct Rule {
    pub record: Option<String>,
    pub alert: Option<String>,
    pub expr: String,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_rule_file_and_a_prometheus_rule_give_the_same_groups() {
        let plain = "groups:\n  - name: g\n    interval: 30s\n    rules:\n      - record: 'a:b'\n        expr: up\n      - alert: Down\n        expr: up == 0\n";
        let object = "apiVersion: monitoring.coreos.com/v1\nkind: PrometheusRule\nspec:\n  groups:\n    - name: g\n      interval: 30s\n      rules:\n        - record: 'a:b'\n          expr: up\n        - alert: Down\n          expr: up == 0\n";
        let groups = RuleFile::parse(plain).unwrap();
        assert_eq!(groups, RuleFile::parse(object).unwrap());
        assert_eq!(groups.len(), 1);
        assert_eq!(groups[0].interval.as_deref(), Some("30s"));
        assert_eq!(groups[0].rules[0].record.as_deref(), Some("a:b"));
        assert_eq!(groups[0].rules[1].alert.as_deref(), Some("Down"));
        assert_eq!(groups[0].rules[1].expr, "up == 0");
    }

    #[test]
    fn a_file_without_groups_has_none_and_a_malformed_one_says_where() {
        assert!(RuleFile::parse("kind: ConfigMap\n").unwrap().is_empty());
        let error = RuleFile::parse("groups:\n  - name: g\n    rules: 7\n").err().unwrap();
        assert!(error.to_string().contains("line 3"), "{error}");
    }
}
