import { PLATFORMS, type Platform, type TextFormat } from '../core/platforms.js';

/**
 * What a channel takes from its platform's row (core/platforms.ts) rather than says itself: its name, the
 * longest part the platform accepts and the dialect it reads, by which delivery splits and converts. Each
 * platform channel extends it, so that none can state another limit than its row's.
 */
export abstract class RowChannel {
  readonly limit: number;
  readonly limitUnit: 'chars' | 'graphemes';
  readonly textFormat: TextFormat;

  constructor(readonly platform: Platform) {
    const row = PLATFORMS[platform];
    this.limit = row.limit;
    this.limitUnit = row.limitUnit;
    this.textFormat = row.textFormat;
  }
}
