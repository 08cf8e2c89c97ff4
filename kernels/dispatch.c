/* Run-time choice of the CPU path and the public entry points for elementwise ops. */
#include <math.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/kern_internal.h"

static const kern_ops *g_ops; /* written once under pthread_once, then read-only */
static pthread_once_t g_ops_once = PTHREAD_ONCE_INIT;

static void ops_init(void) {
    const char *e = getenv("MMRAG_SIMD");
    const kern_ops *avx2 = kern_ops_avx2_table();
    g_ops = (avx2 && !(e && strcmp(e, "scalar") == 0)) ? avx2 : &kern_ops_scalar;
}

const kern_ops *kern_ops_get(void) {
    pthread_once(&g_ops_once, ops_init);
    return g_ops;
}

const char *kern_cpu_path(void) { return kern_ops_get()->name; }

float kern_dot_q8_0_q8_0(int64_t n, const kern_block_q8_0 *x, const kern_block_q8_0 *y) {
    return kern_ops_get()->dot_q8_0_q8_0(n, x, y);
}
float kern_dot_q4_0_q8_0(int64_t n, const kern_block_q4_0 *x, const kern_block_q8_0 *y) {
    return kern_ops_get()->dot_q4_0_q8_0(n, x, y);
}
float kern_dot_q4_1_q8_0(int64_t n, const kern_block_q4_1 *x, const kern_block_q8_0 *y) {
    return kern_ops_get()->dot_q4_1_q8_0(n, x, y);
}
float kern_dot_kq(kern_type t, int64_t n, const void *w, const kern_block_q8_K *y) {
    return kern_ops_get()->dot_kq(t, n, w, y);
}
float kern_dot_q5_q8_0(kern_type t, int64_t n, const void *w, const kern_block_q8_0 *y) {
    return kern_ops_get()->dot_q5_q8_0(t, n, w, y);
}
float kern_dot_f32(int64_t n, const float *x, const float *y) {
    return kern_ops_get()->dot_f32(n, x, y);
}
void kern_softmax(float *x, int64_t n) { kern_ops_get()->softmax(x, n); }
void kern_layernorm(const float *x, float *y, int64_t n, const float *gamma, const float *beta,
                    float eps) {
    if (n > 0) kern_ops_get()->layernorm(x, y, n, gamma, beta, eps);
}
void kern_rmsnorm(const float *x, float *y, int64_t n, const float *w, float eps) {
    if (n > 0) kern_ops_get()->rmsnorm(x, y, n, w, eps);
}
void kern_gelu(float *x, int64_t n) { kern_ops_get()->gelu(x, n); }
void kern_quick_gelu(float *x, int64_t n) { kern_ops_get()->quick_gelu(x, n); }
void kern_silu(float *x, int64_t n) { kern_ops_get()->silu(x, n); }
void kern_swiglu(const float *gate, const float *up, float *y, int64_t n) {
    kern_ops_get()->swiglu(gate, up, y, n);
}
void kern_geglu(const float *gate, const float *up, float *y, int64_t n) {
    kern_ops_get()->geglu(gate, up, y, n);
}
void kern_add(float *y, const float *x, int64_t n) { kern_ops_get()->add(y, x, n); }

/* RoPE angles in double so long positions keep their precision; rot_dim is usually small
 * (64), so the trig per pair (one sincos) is a small cost next to the projections. */
void kern_rope_angles(int rot_dim, int64_t pos, float theta, float freq_scale, float *cs,
                      float *sn) {
    kern_rope_angles_ff(rot_dim, pos, theta, freq_scale, NULL, cs, sn);
}

void kern_rope_angles_ff(int rot_dim, int64_t pos, float theta, float freq_scale,
                         const float *factors, float *cs, float *sn) {
    rot_dim &= ~1;
    for (int i = 0; i < rot_dim / 2; i++) {
        double ang = (double)pos * freq_scale * pow((double)theta, -2.0 * (double)i / (double)rot_dim);
        if (factors) ang /= (double)factors[i];
        double sv, cv;
        sincos(ang, &sv, &cv);
        cs[i] = (float)cv;
        sn[i] = (float)sv;
    }
}

void kern_rope_apply(float *x, int n_heads, int head_dim, int rot_dim, const float *cs,
                     const float *sn, int neox) {
    if (rot_dim > head_dim) rot_dim = head_dim;
    rot_dim &= ~1;
    int half = rot_dim / 2;
    for (int h = 0; h < n_heads; h++) {
        float *v = x + (int64_t)h * head_dim;
        for (int i = 0; i < half; i++) {
            int a = neox ? i : 2 * i;
            int b = neox ? i + half : a + 1;
            float x0 = v[a], x1 = v[b];
            v[a] = x0 * cs[i] - x1 * sn[i];
            v[b] = x0 * sn[i] + x1 * cs[i];
        }
    }
}

void kern_rope(float *x, int n_heads, int head_dim, int rot_dim, int64_t pos, float theta,
               float freq_scale, int neox) {
    if (rot_dim > head_dim) rot_dim = head_dim;
    rot_dim &= ~1;
    int half = rot_dim / 2;
    if (half <= 0) return;
    float cs[256], sn[256];
    for (int i0 = 0; i0 < half; i0 += 256) { /* chunks of 256 pairs: fixed-size tables */
        int cnt = half - i0 < 256 ? half - i0 : 256;
        for (int i = 0; i < cnt; i++) {
            double ang = (double)pos * freq_scale *
                         pow((double)theta, -2.0 * (double)(i0 + i) / (double)rot_dim);
            double sv, cv;
            sincos(ang, &sv, &cv);
            cs[i] = (float)cv;
            sn[i] = (float)sv;
        }
        for (int h = 0; h < n_heads; h++) {
            float *v = x + (int64_t)h * head_dim;
            for (int i = 0; i < cnt; i++) {
                int a = neox ? i0 + i : 2 * (i0 + i);
                int b = neox ? i0 + i + half : a + 1;
                float x0 = v[a], x1 = v[b];
                v[a] = x0 * cs[i] - x1 * sn[i];
                v[b] = x0 * sn[i] + x1 * cs[i];
            }
        }
    }
}
