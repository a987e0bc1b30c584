//! Filter's reasons as data an answer can hand out without a String per node.

/// The rejected candidates of an Evaluate, each with its reason: all the reasons in one
/// string (at 5,000 nodes a string per rejected node was a malloc and its growth each, a
/// quarter of an Evaluate), handed out as `&str`.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Rejections {
    /// Per rejected candidate: its index and where its reason ends in `text`.
    ends: Vec<(usize, usize)>,
    text: String,
}

impl Rejections {
    /// (index into the candidates, reason), in index order.
    pub fn iter(&self) -> impl ExactSizeIterator<Item = (usize, &str)> + '_ {
        (0..self.ends.len()).map(|k| {
            let start = k.checked_sub(1).map_or(0, |before| self.ends[before].1);
            let (index, end) = self.ends[k];
            (index, &self.text[start..end])
        })
    }

    pub fn len(&self) -> usize {
        self.ends.len()
    }

    pub fn is_empty(&self) -> bool {
        self.ends.is_empty()
    }

    /// Appends candidate `index`'s reason, which `write` appends to the string it is given;
    /// `write` returns whether the candidate is rejected (nothing is kept when it is not).
    #[inline]
    pub(super) fn push_with(
        &mut self,
        index: usize,
        write: impl FnOnce(&mut String) -> bool,
    ) -> bool {
        let rejected = write(&mut self.text);
        if rejected {
            self.ends.push((index, self.text.len()));
        }
        rejected
    }
}
