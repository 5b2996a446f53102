/*
 * The numerical half of the mlp_train example: a seeded PRNG, a synthetic
 * classification data set, and a small multi-layer perceptron (tanh
 * hidden layers, softmax cross-entropy) with forward, backward and
 * SGD-with-momentum. Nothing here knows about ranks or libtntcomm;
 * mlp_train.c distributes the work. Backprop reports each gradient tensor
 * through a callback the moment it is final, which is where a data-parallel
 * frontend hooks in its gradient fusion.
 */
#ifndef MLP_MODEL_H
#define MLP_MODEL_H

#include <stddef.h>
#include <stdint.h>

/* Dense layers: 32 -> 64 -> 64 -> 4. */
#define MLP_LAYERS 3
/* A weight and a bias per layer. */
#define MLP_TENSORS (2 * MLP_LAYERS)

/* splitmix64: tiny, seedable with any value, and the same on every rank
 * and every platform, which is what matters here. */
uint64_t mlp_rng_next(uint64_t *state);
/* Uniform in [0, 1) and standard normal (Box-Muller). */
double mlp_rng_uniform(uint64_t *state);
double mlp_rng_normal(uint64_t *state);
/* A seed for stream `stream` of the run seeded by `seed`. */
uint64_t mlp_rng_seed(uint64_t seed, uint64_t stream);

typedef struct mlp_data {
    size_t n;       /* samples */
    size_t dim;     /* features per sample */
    size_t classes;
    float *x;       /* n * dim, row-major */
    int *y;         /* n labels in [0, classes) */
} mlp_data_t;

/* n samples from Gaussian blobs, two per class, so that the classes are
 * not linearly separable. Returns 0, or -1 when out of memory. */
int mlp_data_make(mlp_data_t *d, size_t n, size_t dim, size_t classes,
                  uint64_t seed);
void mlp_data_free(mlp_data_t *d);

typedef struct mlp_layer {
    size_t in, out;
    float *w, *b;   /* out * in row-major, out; slices of mlp_t.params */
    float *gw, *gb; /* gradients; slices of mlp_t.grads */
} mlp_layer_t;

typedef struct mlp {
    size_t width[MLP_LAYERS + 1]; /* width[0] inputs ... outputs */
    mlp_layer_t layer[MLP_LAYERS];
    /* Parameters, gradients and momentum are each one flat array laid out
     * in tensor order (see mlp_tensor), so that the gradient tensors are
     * contiguous in the order they become ready. */
    size_t nparams;
    float *params, *grads, *velocity;
    size_t max_batch;
    float *act[MLP_LAYERS + 1]; /* max_batch * width[l] activations */
    float *delta[2];            /* backprop scratch, max_batch * widest */
} mlp_t;

/* Allocates a network with the given widths for batches of up to
 * max_batch samples; parameters are left uninitialised. 0 or -1. */
int mlp_create(mlp_t *m, const size_t width[MLP_LAYERS + 1],
               size_t max_batch);
void mlp_destroy(mlp_t *m);

/* Xavier-uniform weights and zero biases from the seed. */
void mlp_init_params(mlp_t *m, uint64_t seed);

/*
 * Tensor t in the order backprop produces the gradients: the last layer's
 * bias and weight first, the first layer's last. Gives the gradient
 * buffer, its element count and a name such as "fc3.bias".
 */
void mlp_tensor(const mlp_t *m, size_t t, float **grad, size_t *count,
                const char **name);

/*
 * Forward pass over the samples idx[0..count) (count <= max_batch).
 * Adds the summed cross-entropy to *loss_sum and the number of correct
 * predictions to *correct. Keeps the activations for mlp_backward.
 */
void mlp_forward(mlp_t *m, const mlp_data_t *d, const size_t *idx,
                 size_t count, double *loss_sum, double *correct);

typedef void (*mlp_ready_fn)(void *arg, size_t tensor, float *grad);

/*
 * Backward pass for the samples of the last mlp_forward. The gradients are
 * the per-sample gradients summed and multiplied by `scale`. Calls
 * ready(arg, t, grad) for each tensor as soon as its gradient is final, in
 * tensor order; the buffer must not be touched until the caller says the
 * iteration is over. count 0 gives zero gradients.
 */
void mlp_backward(mlp_t *m, const mlp_data_t *d, const size_t *idx,
                  size_t count, float scale, mlp_ready_fn ready, void *arg);

/* velocity = momentum * velocity + grad; params -= lr * velocity. */
void mlp_sgd_step(mlp_t *m, float lr, float momentum);

/* FNV-1a over the bytes of the parameters and the momentum buffers. */
uint64_t mlp_hash(const mlp_t *m);

#endif /* MLP_MODEL_H */
