% if b.sha256:
<p class="integrity">{{b.size_text}}, SHA-256 <code title="{{b.sha256}}">{{b.sha256[:12]}}…</code>
  % if b.checksum_url:
  <a href="{{b.checksum_url}}">.sha256</a>
  % end
</p>
% end
