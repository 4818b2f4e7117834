// The upstream calls of one request whose answer is checked against its output schema: an
// answer that breaks it is asked again, with the answer and what was wrong with it. The reply
// then counts every call: attempts, upstream time and usage summed.
import type { Answer, ChatMessage, Usage } from '../../contract/index.js';
import { answerFields } from '../results/replies.js';
import type { UpstreamResult } from './call.js';

/** The part of a usage record budgets are settled with. */
export interface Spend {
  promptTokens: number;
  completionTokens: number;
  costUsd: number;
}

export class OutputRounds {
  /** What follows the request's own messages in the next call. */
  readonly messages: ChatMessage[] = [];
  private readonly results: UpstreamResult[] = [];
  private readonly spent: Spend = { promptTokens: 0, completionTokens: 0, costUsd: 0 };

  add(result: UpstreamResult): void {
    this.results.push(result);
  }

  /** Calls made so far. */
  get count(): number {
    return this.results.length;
  }

  get last(): UpstreamResult | undefined {
    return this.results[this.results.length - 1];
  }

  get attempts(): number {
    return this.results.reduce((sum, r) => sum + r.attempts, 0);
  }

  get upstreamMs(): number {
    return this.results.reduce((sum, r) => sum + r.upstreamMs, 0);
  }

  /** The next call carries the answer and the violation, so the model can correct it. */
  askAgain(content: string | null, violation: string): void {
    this.messages.push(
      { role: 'assistant', content: content ?? '' },
      { role: 'user', content: `That answer does not match the required JSON schema: ${violation}. Answer again with only the corrected JSON object.` },
    );
  }

  /** A call's usage booked on its own (an answer asked again). */
  booked(usage: Spend): void {
    this.spent.promptTokens += usage.promptTokens;
    this.spent.completionTokens += usage.completionTokens;
    this.spent.costUsd += usage.costUsd;
  }

  /** What every call spent: those booked so far, and `last` when given. */
  spend(last: Spend | undefined): Spend {
    const { promptTokens, completionTokens, costUsd } = this.spent;
    if (!last) return { promptTokens, completionTokens, costUsd };
    return { promptTokens: promptTokens + last.promptTokens, completionTokens: completionTokens + last.completionTokens, costUsd: costUsd + last.costUsd };
  }

  /** The last call's answer, with every call's usage summed and the typed `data` when it is valid. */
  answer(data: Record<string, unknown> | undefined): Answer {
    const answer = answerFields(this.last as UpstreamResult);
    const usage = this.usage();
    if (usage) answer.usage = usage;
    if (data) answer.data = data;
    return answer;
  }

  private usage(): Usage | undefined {
    const counted = this.results.flatMap((r) => (r.usage ? [r.usage] : []));
    if (counted.length === 0) return undefined;
    if (counted.length === 1) return counted[0];
    return counted.reduce((sum, u) => ({
      prompt_tokens: sum.prompt_tokens + u.prompt_tokens,
      completion_tokens: sum.completion_tokens + u.completion_tokens,
      total_tokens: sum.total_tokens + u.total_tokens,
    }));
  }
}
