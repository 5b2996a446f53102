/*
 * shrink-sim: the messages and rounds of tnt_comm_shrink's agreement at
 * any p (docs/scale.md, "Split and shrink"), by playing its rule
 * (lib/core/comm_shrink.c, agree() and the two member exchanges after
 * it) round by round for every rank in one process. tnt-sim cannot: its
 * operations are collective schedules, fixed in advance, where the
 * agreement's rounds depend on who died when. This is a model of the
 * rule, not the library's code: every rank moves in lockstep rounds (a
 * rank that reads a decision before its round's other messages adopts it
 * there, as the code does), and a connection's end is seen at once.
 *
 * In round r every rank still deciding sends the dead set it knows to
 * every rank it has not seen die, then reads one message from each of
 * them: their round-r set (merged into its own), a decision (adopted,
 * and passed on) or the end of the connection (that rank is dead). It
 * decides when a round heard from the same ranks as the round before,
 * and sends the decision to every rank not in it. Then the members (not
 * in the set) send each other their entry of the new communicator's
 * table and a word that they have it: m(m - 1) messages each.
 *
 *   shrink-sim [-p N] [-f F] [-d ROUND:K]
 *     -p N        ranks (default 4096, at most 4096: the library's limit)
 *     -f F        ranks dead before the call: the last F (default 1)
 *     -d ROUND:K  one more rank (the last survivor, p - F - 1) dies in
 *                 round ROUND after sending its set to ranks 0..K-1
 *
 * Prints one line: the rounds until every survivor had decided, the
 * messages of each kind and the most one rank sent, whether a member of
 * the new communicator is dead (a rank that died after some had decided
 * without it: the member exchange then fails, as documented, and the
 * survivors shrink again), and checks that every survivor decided the
 * same set (exit 1 otherwise). Built, not
 * installed; a model, not a test.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAXP 4096
#define WORDS (MAXP / 64)

typedef struct rank {
    uint64_t known[WORDS], seen[WORDS], heard_prev[WORDS];
    uint64_t sent[WORDS]; /* the set sent at this round's start */
    int decided;          /* 0: deciding; else the round it decided + 1 */
    int decided_now;      /* decided in this round (sends it after) */
    long msgs;            /* everything it sent */
} rank_t;

static int bit(const uint64_t *b, int i)
{
    return (int)((b[i / 64] >> (i % 64)) & 1u);
}

static void set_bit(uint64_t *b, int i)
{
    b[i / 64] |= (uint64_t)1 << (i % 64);
}

static int usage(void)
{
    fputs("usage: shrink-sim [-p N (2..4096)] [-f F (0..N-1)] "
          "[-d ROUND:K]\n", stderr);
    return 2;
}

int main(int argc, char **argv)
{
    int p = 4096, f = 1, die_round = -1, die_after = 0;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "-p") && i + 1 < argc)
            p = atoi(argv[++i]);
        else if (!strcmp(argv[i], "-f") && i + 1 < argc)
            f = atoi(argv[++i]);
        else if (!strcmp(argv[i], "-d") && i + 1 < argc) {
            if (sscanf(argv[++i], "%d:%d", &die_round, &die_after) != 2)
                return usage();
        } else
            return usage();
    }
    /* The one dying in the agreement needs a survivor besides it. */
    if (p < 2 || p > MAXP || f < 0 || f >= p ||
        (die_round >= 0 && (f + 2 > p || die_after < 0 || die_after > p)))
        return usage();
    int victim = die_round >= 0 ? p - f - 1 : -1;
    rank_t *r = calloc((size_t)p, sizeof(*r));
    if (!r)
        return 1;
    /* alive_to[q]: the last round q starts (-1: dead before the call;
     * p + 1: alive throughout). */
    int *alive_to = malloc((size_t)p * sizeof(int));
    if (!alive_to)
        return 1;
    for (int q = 0; q < p; q++) {
        alive_to[q] = q >= p - f ? -1 : (q == victim ? die_round : p + 1);
        for (int k = 0; k < p; k++)
            set_bit(r[q].heard_prev, k);
    }
    long round_msgs = 0, to_dead = 0, decided_msgs = 0;
    int rounds = 0;
    for (int rd = 0; rd <= p; rd++) {
        int deciding = 0;
        /* Sends: every rank deciding and alive sends its set to every
         * rank it has not seen die (the victim to the first K only). */
        for (int i = 0; i < p; i++) {
            rank_t *me = &r[i];
            if (me->decided || alive_to[i] < rd)
                continue;
            deciding = 1;
            memcpy(me->sent, me->known, sizeof(me->sent));
            int n = 0;
            for (int q = 0; q < p; q++) {
                if (q == i || bit(me->seen, q))
                    continue;
                if (i == victim && rd == die_round && n >= die_after)
                    break;
                n++;
                me->msgs++;
                if (alive_to[q] < rd)
                    to_dead++;
                else
                    round_msgs++;
            }
        }
        if (!deciding)
            break;
        rounds = rd + 1;
        /* Reads, in rank order, as agree() does. */
        for (int i = 0; i < p; i++) {
            rank_t *me = &r[i];
            if (me->decided || alive_to[i] <= rd)
                continue; /* the victim reads nothing in its last round */
            uint64_t heard[WORDS] = {0};
            set_bit(heard, i);
            int adopted = -1;
            for (int q = 0; q < p && adopted < 0; q++) {
                if (q == i || bit(me->seen, q))
                    continue;
                rank_t *o = &r[q];
                /* its stream holds a decision from an earlier round */
                if (o->decided && o->decided <= rd) {
                    adopted = q;
                    break;
                }
                /* The victim's sends went to ranks 0.. in order, and
                 * every other survivor ranks below it. */
                int got = alive_to[q] > rd ||
                          (alive_to[q] == rd && i < die_after);
                if (!got) {
                    set_bit(me->seen, q);
                    set_bit(me->known, q);
                    continue;
                }
                set_bit(heard, q);
                for (int w = 0; w < WORDS; w++)
                    me->known[w] |= o->sent[w];
            }
            if (adopted >= 0) {
                memcpy(me->known, r[adopted].known, sizeof(me->known));
                me->decided_now = 1;
            } else if (!memcmp(heard, me->heard_prev, sizeof(heard))) {
                me->decided_now = 1;
            } else {
                memcpy(me->heard_prev, heard, sizeof(heard));
            }
        }
        /* Deciders send the decision to every rank not in it. */
        for (int i = 0; i < p; i++) {
            rank_t *me = &r[i];
            if (!me->decided_now)
                continue;
            me->decided_now = 0;
            me->decided = rd + 1;
            for (int q = 0; q < p; q++)
                if (q != i && !bit(me->known, q)) {
                    me->msgs++;
                    decided_msgs++;
                }
        }
    }
    /* Every survivor must hold the same set. */
    int first = -1, m = 0, ndead = 0, same = 1;
    for (int i = 0; i < p; i++) {
        if (alive_to[i] <= p) /* dead before or during the agreement */
            continue;
        if (!r[i].decided) {
            fprintf(stderr, "shrink-sim: rank %d never decided\n", i);
            return 1;
        }
        if (first < 0)
            first = i;
        else if (memcmp(r[i].known, r[first].known, sizeof(r[i].known)))
            same = 0;
    }
    /* A member (not in the set) that is dead fails the member exchange
     * on the ranks that miss its entry: the call fails there, and the
     * survivors shrink again (the library's documented outcome). */
    int member_dead = 0;
    for (int q = 0; q < p; q++) {
        ndead += bit(r[first].known, q);
        member_dead |= !bit(r[first].known, q) && alive_to[q] <= p;
    }
    m = p - ndead;
    long member_msgs = 2L * m * (m - 1);
    long most = 0;
    for (int i = 0; i < p; i++) {
        if (!bit(r[first].known, i))
            r[i].msgs += 2L * (m - 1);
        if (r[i].msgs > most)
            most = r[i].msgs;
    }
    printf("p=%d dead_before=%d died_in_round=%d after_sends=%d: "
           "agreed_dead=%d rounds=%d round_msgs=%ld to_dead=%ld "
           "decided_msgs=%ld member_msgs=%ld total=%ld most_by_one=%ld "
           "%s %s\n", p, f, die_round, die_round >= 0 ? die_after : 0, ndead,
           rounds, round_msgs, to_dead, decided_msgs, member_msgs,
           round_msgs + to_dead + decided_msgs + member_msgs, most,
           same ? "same-set" : "SETS-DIFFER",
           member_dead ? "then-fails:a-member-is-dead(shrink-again)"
                       : "then-communicator");
    free(r);
    free(alive_to);
    return same ? 0 : 1;
}
