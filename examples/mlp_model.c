/*
 * The MLP of the mlp_train example (interface and conventions in
 * mlp_model.h): data generation, forward, backward and the optimizer, in
 * plain loops. Speed does not matter at this size; what matters is that
 * every rank running this code on the same inputs gets the same bits, so
 * there is no threading and no data-dependent evaluation order.
 */
#include "mlp_model.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* Blob centres are drawn with this spread per feature, samples around them
 * with this noise: close enough that the classes overlap a little and the
 * loss keeps falling over several epochs rather than in one step. */
#define BLOB_SPREAD 0.5
#define BLOB_NOISE 1.0
#define BLOBS_PER_CLASS 2

uint64_t mlp_rng_next(uint64_t *state)
{
    uint64_t z = (*state += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

double mlp_rng_uniform(uint64_t *state)
{
    /* The top 53 bits fill a double's mantissa exactly. */
    return (double)(mlp_rng_next(state) >> 11) * (1.0 / 9007199254740992.0);
}

double mlp_rng_normal(uint64_t *state)
{
    /* 1 - u is in (0, 1], so the logarithm is finite. */
    double u1 = 1.0 - mlp_rng_uniform(state);
    double u2 = mlp_rng_uniform(state);
    return sqrt(-2.0 * log(u1)) * cos(6.283185307179586 * u2);
}

uint64_t mlp_rng_seed(uint64_t seed, uint64_t stream)
{
    uint64_t s = seed ^ (stream * 0xd1b54a32d192ed03ull);
    return mlp_rng_next(&s);
}

/* ---- data -------------------------------------------------------------- */

int mlp_data_make(mlp_data_t *d, size_t n, size_t dim, size_t classes,
                  uint64_t seed)
{
    size_t nblobs = classes * BLOBS_PER_CLASS;
    double *centre = malloc(nblobs * dim * sizeof(*centre));
    memset(d, 0, sizeof(*d));
    d->x = malloc(n * dim * sizeof(*d->x));
    d->y = malloc(n * sizeof(*d->y));
    if (!centre || !d->x || !d->y) {
        free(centre);
        mlp_data_free(d);
        return -1;
    }
    d->n = n;
    d->dim = dim;
    d->classes = classes;

    uint64_t rng = seed;
    for (size_t i = 0; i < nblobs * dim; i++)
        centre[i] = BLOB_SPREAD * mlp_rng_normal(&rng);
    for (size_t i = 0; i < n; i++) {
        size_t blob = (size_t)(mlp_rng_next(&rng) % nblobs);
        /* Blob b belongs to class b % classes, so each class has blobs in
         * unrelated places. */
        d->y[i] = (int)(blob % classes);
        for (size_t k = 0; k < dim; k++)
            d->x[i * dim + k] = (float)(centre[blob * dim + k] +
                                        BLOB_NOISE * mlp_rng_normal(&rng));
    }
    free(centre);
    return 0;
}

void mlp_data_free(mlp_data_t *d)
{
    free(d->x);
    free(d->y);
    d->x = NULL;
    d->y = NULL;
}

/* ---- the network ------------------------------------------------------- */

int mlp_create(mlp_t *m, const size_t width[MLP_LAYERS + 1],
               size_t max_batch)
{
    memset(m, 0, sizeof(*m));
    size_t widest = 0;
    for (int l = 0; l <= MLP_LAYERS; l++) {
        m->width[l] = width[l];
        if (width[l] > widest)
            widest = width[l];
    }
    for (int l = 0; l < MLP_LAYERS; l++)
        m->nparams += width[l + 1] * (width[l] + 1);
    m->max_batch = max_batch;

    m->params = malloc(m->nparams * sizeof(float));
    m->grads = calloc(m->nparams, sizeof(float));
    m->velocity = calloc(m->nparams, sizeof(float));
    int ok = m->params && m->grads && m->velocity;
    for (int l = 0; l <= MLP_LAYERS && ok; l++)
        ok = (m->act[l] = malloc(max_batch * width[l] * sizeof(float))) != 0;
    for (int i = 0; i < 2 && ok; i++)
        ok = (m->delta[i] = malloc(max_batch * widest * sizeof(float))) != 0;
    if (!ok) {
        mlp_destroy(m);
        return -1;
    }

    /* Tensor order is backprop order: walk the layers from the last. */
    size_t off = 0;
    for (int l = MLP_LAYERS - 1; l >= 0; l--) {
        mlp_layer_t *L = &m->layer[l];
        L->in = width[l];
        L->out = width[l + 1];
        L->b = m->params + off;
        L->gb = m->grads + off;
        off += L->out;
        L->w = m->params + off;
        L->gw = m->grads + off;
        off += L->out * L->in;
    }
    return 0;
}

void mlp_destroy(mlp_t *m)
{
    free(m->params);
    free(m->grads);
    free(m->velocity);
    for (int l = 0; l <= MLP_LAYERS; l++)
        free(m->act[l]);
    for (int i = 0; i < 2; i++)
        free(m->delta[i]);
    memset(m, 0, sizeof(*m));
}

void mlp_init_params(mlp_t *m, uint64_t seed)
{
    uint64_t rng = seed;
    for (int l = 0; l < MLP_LAYERS; l++) {
        mlp_layer_t *L = &m->layer[l];
        double a = sqrt(6.0 / (double)(L->in + L->out));
        for (size_t i = 0; i < L->out * L->in; i++)
            L->w[i] = (float)((2.0 * mlp_rng_uniform(&rng) - 1.0) * a);
        for (size_t j = 0; j < L->out; j++)
            L->b[j] = 0.0f;
    }
}

void mlp_tensor(const mlp_t *m, size_t t, float **grad, size_t *count,
                const char **name)
{
    static const char *const names[MLP_TENSORS] = {
        "fc3.bias", "fc3.weight", "fc2.bias",
        "fc2.weight", "fc1.bias", "fc1.weight",
    };
    const mlp_layer_t *L = &m->layer[MLP_LAYERS - 1 - t / 2];
    int is_weight = (int)(t % 2);
    *grad = is_weight ? L->gw : L->gb;
    *count = is_weight ? L->out * L->in : L->out;
    *name = names[t];
}

void mlp_forward(mlp_t *m, const mlp_data_t *d, const size_t *idx,
                 size_t count, double *loss_sum, double *correct)
{
    for (size_t i = 0; i < count; i++)
        memcpy(m->act[0] + i * d->dim, d->x + idx[i] * d->dim,
               d->dim * sizeof(float));

    for (int l = 0; l < MLP_LAYERS; l++) {
        const mlp_layer_t *L = &m->layer[l];
        const float *in = m->act[l];
        float *out = m->act[l + 1];
        for (size_t i = 0; i < count; i++) {
            for (size_t j = 0; j < L->out; j++) {
                const float *w = L->w + j * L->in;
                const float *x = in + i * L->in;
                float s = L->b[j];
                for (size_t k = 0; k < L->in; k++)
                    s += w[k] * x[k];
                /* The last layer's outputs are the logits. */
                out[i * L->out + j] = (l < MLP_LAYERS - 1) ? tanhf(s) : s;
            }
        }
    }

    size_t nc = m->width[MLP_LAYERS];
    for (size_t i = 0; i < count; i++) {
        const float *z = m->act[MLP_LAYERS] + i * nc;
        size_t best = 0;
        for (size_t j = 1; j < nc; j++)
            if (z[j] > z[best])
                best = j;
        double sum = 0.0;
        for (size_t j = 0; j < nc; j++)
            sum += exp((double)z[j] - (double)z[best]);
        /* -log softmax(z)[y], shifted by the largest logit for range. */
        int y = d->y[idx[i]];
        *loss_sum += (double)z[best] + log(sum) - (double)z[y];
        *correct += (best == (size_t)y);
    }
}

void mlp_backward(mlp_t *m, const mlp_data_t *d, const size_t *idx,
                  size_t count, float scale, mlp_ready_fn ready, void *arg)
{
    /* Gradient of the loss with respect to the logits: softmax - one-hot,
     * scaled so that the summed gradients come out as the caller wants. */
    size_t nc = m->width[MLP_LAYERS];
    float *delta = m->delta[0], *next = m->delta[1];
    for (size_t i = 0; i < count; i++) {
        const float *z = m->act[MLP_LAYERS] + i * nc;
        float zmax = z[0];
        for (size_t j = 1; j < nc; j++)
            zmax = z[j] > zmax ? z[j] : zmax;
        float sum = 0.0f;
        for (size_t j = 0; j < nc; j++)
            sum += expf(z[j] - zmax);
        for (size_t j = 0; j < nc; j++) {
            float p = expf(z[j] - zmax) / sum;
            float target = (j == (size_t)d->y[idx[i]]) ? 1.0f : 0.0f;
            delta[i * nc + j] = (p - target) * scale;
        }
    }

    for (int l = MLP_LAYERS - 1; l >= 0; l--) {
        mlp_layer_t *L = &m->layer[l];
        const float *in = m->act[l];
        size_t t = 2 * (size_t)(MLP_LAYERS - 1 - l);

        for (size_t j = 0; j < L->out; j++) {
            float s = 0.0f;
            for (size_t i = 0; i < count; i++)
                s += delta[i * L->out + j];
            L->gb[j] = s;
        }
        ready(arg, t, L->gb);

        for (size_t j = 0; j < L->out; j++) {
            for (size_t k = 0; k < L->in; k++) {
                float s = 0.0f;
                for (size_t i = 0; i < count; i++)
                    s += delta[i * L->out + j] * in[i * L->in + k];
                L->gw[j * L->in + k] = s;
            }
        }
        ready(arg, t + 1, L->gw);

        if (l == 0)
            break;
        /* Propagate through the weights (not the gradients, which now
         * belong to the communication library) and tanh' = 1 - tanh^2. */
        for (size_t i = 0; i < count; i++) {
            for (size_t k = 0; k < L->in; k++) {
                float s = 0.0f;
                for (size_t j = 0; j < L->out; j++)
                    s += delta[i * L->out + j] * L->w[j * L->in + k];
                float a = in[i * L->in + k];
                next[i * L->in + k] = s * (1.0f - a * a);
            }
        }
        float *tmp = delta;
        delta = next;
        next = tmp;
    }
}

void mlp_sgd_step(mlp_t *m, float lr, float momentum)
{
    for (size_t i = 0; i < m->nparams; i++) {
        m->velocity[i] = momentum * m->velocity[i] + m->grads[i];
        m->params[i] -= lr * m->velocity[i];
    }
}

static uint64_t fnv1a(uint64_t h, const void *data, size_t len)
{
    const unsigned char *p = data;
    for (size_t i = 0; i < len; i++) {
        h ^= p[i];
        h *= 0x100000001b3ull;
    }
    return h;
}

uint64_t mlp_hash(const mlp_t *m)
{
    uint64_t h = 0xcbf29ce484222325ull;
    h = fnv1a(h, m->params, m->nparams * sizeof(float));
    return fnv1a(h, m->velocity, m->nparams * sizeof(float));
}
