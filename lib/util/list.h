/*
 * Intrusive doubly-linked lists: a node lives inside the element, so
 * joining or leaving a list allocates nothing and unlinking is O(1)
 * without a walk. A list is a circular chain through a sentinel head;
 * an element on no list has its node's pointers NULL (a zeroed element is
 * on no list), and unlinking restores that, so tnt__list_linked tells
 * whether an element is on a list.
 *
 * Nothing here locks: the owner of the list guards it.
 */
#ifndef TNT_UTIL_LIST_H
#define TNT_UTIL_LIST_H

#include <stddef.h>

typedef struct tnt_list_node {
    struct tnt_list_node *prev, *next;
} tnt_list_node_t;

typedef struct tnt_list {
    tnt_list_node_t head;      /* sentinel: head.next the first element */
} tnt_list_t;

/* The element that holds `node` as its field `member`. */
#define TNT_LIST_ENTRY(node, type, member)                                   \
    ((type *)(void *)((char *)(node) - offsetof(type, member)))

/* An empty list. Required before first use: a zeroed list is not one. */
static inline void tnt__list_init(tnt_list_t *l)
{
    l->head.prev = l->head.next = &l->head;
}

static inline int tnt__list_empty(const tnt_list_t *l)
{
    return l->head.next == &l->head;
}

/* Whether n is on some list. */
static inline int tnt__list_linked(const tnt_list_node_t *n)
{
    return n->next != NULL;
}

/* Put n (on no list) right after pos (an element's node or a head). */
static inline void tnt__list_insert_after(tnt_list_node_t *pos,
                                          tnt_list_node_t *n)
{
    n->prev = pos;
    n->next = pos->next;
    pos->next->prev = n;
    pos->next = n;
}

static inline void tnt__list_push_front(tnt_list_t *l, tnt_list_node_t *n)
{
    tnt__list_insert_after(&l->head, n);
}

static inline void tnt__list_push_back(tnt_list_t *l, tnt_list_node_t *n)
{
    tnt__list_insert_after(l->head.prev, n);
}

/* Take n off its list; n is then on no list. */
static inline void tnt__list_unlink(tnt_list_node_t *n)
{
    n->prev->next = n->next;
    n->next->prev = n->prev;
    n->prev = n->next = NULL;
}

/* The first node, or NULL if the list is empty. */
static inline tnt_list_node_t *tnt__list_first(const tnt_list_t *l)
{
    return tnt__list_empty(l) ? NULL : l->head.next;
}

/* The node after n on list l, or NULL if n is the last. */
static inline tnt_list_node_t *tnt__list_next(const tnt_list_t *l,
                                              const tnt_list_node_t *n)
{
    return n->next == &l->head ? NULL : n->next;
}

/* Walk list l: `it` each node in order, `nx` the one after it, read
 * before the body runs, so the body may unlink (or free) `it`. It must
 * not unlink `nx`. */
#define TNT_LIST_FOREACH_SAFE(l, it, nx)                                     \
    for ((it) = (l)->head.next, (nx) = (it)->next; (it) != &(l)->head;       \
         (it) = (nx), (nx) = (it)->next)

#endif /* TNT_UTIL_LIST_H */
