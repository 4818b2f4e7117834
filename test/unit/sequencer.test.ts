import { describe, expect, it } from 'vitest';
import { longestFirst, spreadEvenly } from '../helpers/sequencer.js';

describe('spreadEvenly', () => {
  it('places the spread items evenly among the rest, the first of them first, both orders kept', () => {
    expect(spreadEvenly(['A', 'B', 'C'], ['1', '2', '3', '4', '5', '6'])).toEqual(['A', '1', '2', 'B', '3', '4', 'C', '5', '6']);
  });

  it('keeps every item when one side is empty', () => {
    expect(spreadEvenly([], ['1', '2'])).toEqual(['1', '2']);
    expect(spreadEvenly(['A', 'B'], [])).toEqual(['A', 'B']);
  });
});

describe('longestFirst', () => {
  it('puts files without a time first, then the longest, ties by path', () => {
    expect(longestFirst(['a', 'b', 'c', 'new', 'd'], { a: 1, b: 30, c: 1, d: 2 })).toEqual(['new', 'b', 'd', 'a', 'c']);
  });
});
