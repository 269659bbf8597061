% for paragraph in text:
<p>\\
% for code, part in paragraph:
% if code:
<code>{{part}}</code>\\
% else:
{{part}}\\
% end
% end
</p>
% end
