/*
 * The data half of the digits_train example: reads the 8x8 handwritten
 * digits that scikit-learn ships (sklearn/datasets/data/digits.csv.gz,
 * 1797 rows of 64 pixel values in 0..16 and a label) with zlib, so that
 * the C program needs no Python at run time, and splits it into a training
 * and a held-out test set with a seeded shuffle that is the same on every
 * rank.
 */
#ifndef DIGITS_DATA_H
#define DIGITS_DATA_H

#include <stddef.h>
#include <stdint.h>

#include "mlp_model.h"

#define DIGITS_FEATURES 64
#define DIGITS_CLASSES 10

/* Where Debian's python3-sklearn puts the file. */
#define DIGITS_DEFAULT_PATH                                                 \
    "/usr/lib/python3/dist-packages/sklearn/datasets/data/digits.csv.gz"

/*
 * Reads the whole file into *d (pixels scaled to [0, 1]). Returns 0, or
 * -1 with a message in err (naming the file, the line and what was wrong,
 * or how to get the file when it is missing).
 */
int digits_load(const char *path, mlp_data_t *d, char *err, size_t errlen);

/*
 * Moves the samples of *all into *train and *test: a seeded shuffle, then
 * the first n_test samples are the test set. *all is emptied. 0 or -1
 * (out of memory).
 */
int digits_split(mlp_data_t *all, size_t n_test, uint64_t seed,
                 mlp_data_t *train, mlp_data_t *test);

#endif /* DIGITS_DATA_H */
