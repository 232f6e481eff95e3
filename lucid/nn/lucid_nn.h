/* Window kernels of lucid.nn (lucid_nn.c), float32 and float64. */
#ifndef LUCID_NN_H
#define LUCID_NN_H
#include <stddef.h>
#include <stdint.h>

/* The geometry of a 2-d window op on an (n, c, h, w) input: kernel (kh, kw), stride,
 * dilation, the padding before each dim (ph, pw) and the output size (oh, ow). */
typedef struct {
    ptrdiff_t n, c, h, w, kh, kw, sh, sw, dh, dw, ph, pw, oh, ow;
} lucid_win;

#define LUCID_NN_DECLARE(T, SFX)                                                          \
void lucid_im2col_##SFX(const T *x, T *cols, const lucid_win *w);                         \
void lucid_col2im_##SFX(const T *cols, T *gx, const lucid_win *w);                        \
void lucid_maxpool_##SFX(const T *x, T *y, int64_t *arg, const lucid_win *w);             \
void lucid_maxpool_grad_##SFX(const T *g, const int64_t *arg, T *gx, const lucid_win *w);
LUCID_NN_DECLARE(float, f32)
LUCID_NN_DECLARE(double, f64)
#undef LUCID_NN_DECLARE

#endif
