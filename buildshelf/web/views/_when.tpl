% if b.iso:
<time datetime="{{b.iso}}">{{b.date}}</time>
% else:
<span class="date">{{b.date}}</span>
% end
