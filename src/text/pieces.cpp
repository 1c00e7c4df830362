// The five delimiter behaviours as a streaming state machine over (span, is_match) events. At
// most one part is held back: the one the next span might still join.
#include "text/pieces.h"

namespace strata::text {

void SpanSplitter::add_match(size_t begin, size_t end) {
  if (consumed_ < begin) add_span(consumed_, begin, false);
  add_span(begin, end, true);
  consumed_ = end;
}

void SpanSplitter::finish() {
  if (consumed_ < text_.size()) add_span(consumed_, text_.size(), false);
  consumed_ = text_.size();
  if (has_pending_) emit(pending_begin_, pending_end_);
  has_pending_ = false;
}

void SpanSplitter::emit(size_t begin, size_t end) {
  if (begin < end) sink_(text_.substr(begin, end - begin), at_start_ && begin == 0);
}

void SpanSplitter::add_span(size_t begin, size_t end, bool is_match) {
  if (invert_) is_match = !is_match;
  switch (behavior_) {
    case SplitBehavior::kRemoved:
      if (!is_match) emit(begin, end);
      return;
    case SplitBehavior::kIsolated:
      emit(begin, end);
      return;
    case SplitBehavior::kMergedWithPrevious:
      // A match joins the part before it, unless that part already ends in a match.
      if (is_match && has_pending_ && !pending_match_) {
        pending_end_ = end;
        pending_match_ = true;
        return;
      }
      break;
    case SplitBehavior::kMergedWithNext:
      // A match joins the part after it, when that part is not a match itself.
      if (has_pending_ && pending_match_ && !is_match) {
        emit(pending_begin_, end);
        has_pending_ = false;
        return;
      }
      break;
    case SplitBehavior::kContiguous:
      // Runs of matches, and runs of non-matches, form one part each.
      if (has_pending_ && pending_match_ == is_match) {
        pending_end_ = end;
        return;
      }
      break;
  }
  if (has_pending_) emit(pending_begin_, pending_end_);
  has_pending_ = true;
  pending_begin_ = begin;
  pending_end_ = end;
  pending_match_ = is_match;
}

}  // namespace strata::text
