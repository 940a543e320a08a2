//! Search-quality metrics over graded relevance judgements (the harness in
//! `examples/search_quality.rs` prints them; docs/search.md reports them).
//!
//! Grades: 3 exactly what was asked, 2 clearly relevant, 1 partially relevant, absent 0.
//! NDCG uses every grade (gain 2^g − 1); MRR and recall count grades ≥ 2 as relevant.

use std::collections::HashMap;

/// Grades at or above this count as relevant for MRR and recall.
pub const RELEVANT: u8 = 2;

/// NDCG@k of a ranking (package names, best first) against graded judgements.
pub fn ndcg_at(k: usize, ranking: &[String], grades: &HashMap<String, u8>) -> f64 {
    let gain = |grade: u8| f64::from((1u32 << grade) - 1);
    let discount = |rank: usize| 1.0 / ((rank + 2) as f64).log2();
    let dcg: f64 = ranking
        .iter()
        .take(k)
        .enumerate()
        .map(|(rank, name)| gain(grades.get(name).copied().unwrap_or(0)) * discount(rank))
        .sum();
    let mut ideal: Vec<u8> = grades.values().copied().collect();
    ideal.sort_unstable_by(|a, b| b.cmp(a));
    let idcg: f64 = ideal
        .into_iter()
        .take(k)
        .enumerate()
        .map(|(rank, grade)| gain(grade) * discount(rank))
        .sum();
    if idcg == 0.0 { 0.0 } else { dcg / idcg }
}

/// Reciprocal rank of the first relevant result (0 when none is ranked).
pub fn reciprocal_rank(ranking: &[String], grades: &HashMap<String, u8>) -> f64 {
    ranking
        .iter()
        .position(|name| grades.get(name).is_some_and(|g| *g >= RELEVANT))
        .map_or(0.0, |rank| 1.0 / (rank + 1) as f64)
}

/// Share of the relevant agents found in the top `k`.
pub fn recall_at(k: usize, ranking: &[String], grades: &HashMap<String, u8>) -> f64 {
    let relevant = grades.values().filter(|g| **g >= RELEVANT).count();
    if relevant == 0 {
        return 0.0;
    }
    let found = ranking
        .iter()
        .take(k)
        .filter(|name| grades.get(*name).is_some_and(|g| *g >= RELEVANT))
        .count();
    found as f64 / relevant as f64
}

#[cfg(test)]
mod tests {
    use super::*;

    fn names(list: &[&str]) -> Vec<String> {
        list.iter().map(|s| (*s).to_owned()).collect()
    }

    fn grades(list: &[(&str, u8)]) -> HashMap<String, u8> {
        list.iter().map(|(n, g)| ((*n).to_owned(), *g)).collect()
    }

    #[test]
    fn a_perfect_ranking_scores_one_everywhere() {
        let judged = grades(&[("a", 3), ("b", 2), ("c", 1)]);
        let ranking = names(&["a", "b", "c"]);
        assert!((ndcg_at(10, &ranking, &judged) - 1.0).abs() < 1e-12);
        assert_eq!(reciprocal_rank(&ranking, &judged), 1.0);
        assert_eq!(recall_at(10, &ranking, &judged), 1.0);
    }

    #[test]
    fn order_matters_to_ndcg_and_mrr_but_not_to_recall() {
        let judged = grades(&[("a", 3), ("b", 2)]);
        let ranking = names(&["x", "b", "a"]);
        let ndcg = ndcg_at(10, &ranking, &judged);
        assert!(ndcg > 0.0 && ndcg < 1.0, "{ndcg}");
        assert_eq!(reciprocal_rank(&ranking, &judged), 0.5);
        assert_eq!(recall_at(10, &ranking, &judged), 1.0);
        assert_eq!(recall_at(2, &ranking, &judged), 0.5);
    }

    #[test]
    fn partially_relevant_results_count_for_ndcg_only() {
        let judged = grades(&[("a", 1), ("b", 3)]);
        let ranking = names(&["a"]);
        assert!(ndcg_at(10, &ranking, &judged) > 0.0);
        assert_eq!(reciprocal_rank(&ranking, &judged), 0.0);
        assert_eq!(recall_at(10, &ranking, &judged), 0.0);
    }

    #[test]
    fn nothing_relevant_or_nothing_found_scores_zero() {
        let empty = HashMap::new();
        assert_eq!(ndcg_at(10, &names(&["a"]), &empty), 0.0);
        assert_eq!(recall_at(10, &names(&["a"]), &empty), 0.0);
        assert_eq!(ndcg_at(10, &[], &grades(&[("a", 3)])), 0.0);
    }
}
