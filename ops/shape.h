// The row view of a canonical StepSpec: what every launch rule and kernel
// indexes by.
#ifndef CAKE_OPS_SHAPE_H_
#define CAKE_OPS_SHAPE_H_

#include <algorithm>
#include <cstdint>

#include "cake/routing.pb.h"
#include "cake/step.pb.h"

namespace cake {

struct RowShape {
  int64_t tokens = 0;
  int64_t heads = 1;
  int64_t dim = 0;
  int64_t token_stride = 0;  // elements
  int64_t head_stride = 0;   // elements

  int64_t rows() const { return tokens * heads; }
  HeadsForm form() const {
    if (heads == 1) return HEADS_FORM_ROWS;
    return head_stride == dim && token_stride == heads * dim ? HEADS_FORM_CONTIGUOUS
                                                             : HEADS_FORM_STRIDED;
  }
};

// Reads the layout of a spec whose defaults are filled in (planner's
// Canonicalize).
inline RowShape RowShapeOf(const StepSpec& spec) {
  const Layout& l = spec.layout();
  return RowShape{l.tokens(), l.heads(), l.dim(), l.token_stride(), l.head_stride()};
}

// Whether the spec asks for `phase`.
inline bool HasPhase(const StepSpec& spec, Phase phase) {
  return std::find(spec.phases().begin(), spec.phases().end(), phase) != spec.phases().end();
}

}  // namespace cake

#endif  // CAKE_OPS_SHAPE_H_
